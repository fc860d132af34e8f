#!/usr/bin/env bash
# End-to-end tests: build the control plane (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl from k8s.io/kubernetes; kwok) and examples/allinone into the cache
# folder ($KELEMETRY_E2E_CACHE, default ~/.cache/kelemetry-e2e/bin; reused when up to date), then
# run the scenarios in e2e/ against a real control plane. A cold build takes 15-25 minutes on
# 2 cores, a cached one seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

# -trimpath here too, so that the test binary reuses the packages compiled for the binaries.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath"
cache="${KELEMETRY_E2E_CACHE:-$HOME/.cache/kelemetry-e2e/bin}"
export KELEMETRY_E2E_CACHE="$cache"

t0=$(date +%s)
echo "e2e: building binaries into $cache"
(cd e2e && go run ./cmd/buildbins)
t1=$(date +%s)
echo "e2e: binaries ready in $((t1 - t0))s"

status=0
(cd e2e && KELEMETRY_E2E_REQUIRE=1 go test -count=1 -timeout 40m -v ./...) || status=$?
t2=$(date +%s)
echo "e2e: tests took $((t2 - t1))s (exit $status); total $((t2 - t0))s"

# Nothing may outlive the tests.
if leftover=$(pgrep -a -f "^$cache/" 2>/dev/null); then
	echo "e2e: processes left behind:" >&2
	echo "$leftover" >&2
	status=1
fi
exit "$status"

#!/usr/bin/env bash
# End-to-end tests: build the control plane (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl from k8s.io/kubernetes; kwok), Jaeger v2, promtool, helm and an
# OpenTelemetry Collector (e2e/tools/*) and
# cmd/kelemetry into the cache folder ($KELEMETRY_E2E_CACHE, default
# ~/.cache/kelemetry-e2e/bin; each part reused when up to date), then run the scenarios in e2e/
# against a real control plane and a real Jaeger. A cold build takes 20-35 minutes on 2 cores for
# the control plane plus about 13 minutes (2.3 GB of memory) for Jaeger, 6 for promtool and helm
# and 1.5 for the Collector; a cached one seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

# -trimpath here too, so that the test binary reuses the packages compiled for the binaries.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath"
cache="${KELEMETRY_E2E_CACHE:-$HOME/.cache/kelemetry-e2e/bin}"
mkdir -p "$cache"
cache=$(cd "$cache" && pwd) # absolute: the commands below run in e2e/
export KELEMETRY_E2E_CACHE="$cache"

t0=$(date +%s)
echo "e2e: building binaries into $cache"
(cd e2e && go run ./cmd/buildbins)
t1=$(date +%s)
echo "e2e: binaries ready in $((t1 - t0))s"

# Processes of the cached binaries already running (a test cluster started by hand) are not ours.
before=$(pgrep -f "^$cache/" | sort || true)
status=0
(cd e2e && KELEMETRY_E2E_REQUIRE=1 go test -count=1 -timeout 40m -v ./...) || status=$?
# The multi-process tests of the NATS audit queue (root module, build tag e2e): the cached
# all-in-one as replicas, a 3-node JetStream cluster embedded in the test, the cached Jaeger:
# a NATS node stopped during ingest, a replica killed with SIGKILL, everything restarted.
KELEMETRY_E2E_REQUIRE=1 KELEMETRY_ALLINONE_BIN="$cache/kelemetry-allinone" go test -tags e2e -count=1 -timeout 20m -v \
	./natsqueue/natse2e || status=$?
# The managed-cluster path through a real OpenTelemetry Collector (the cached otelcol-kelemetry,
# built by the Collector builder from e2e/tools/otelcol): its filelog and Kafka receivers, OTLP to
# Kelemetry; the trees equal the webhook's, and a SIGKILL of the cached all-in-one loses nothing.
KELEMETRY_E2E_REQUIRE=1 KELEMETRY_ALLINONE_BIN="$cache/kelemetry-allinone" KELEMETRY_OTELCOL_BIN="$cache/otelcol-kelemetry" \
	go test -tags e2e -count=1 -timeout 10m -v -run '^TestCollector' . || status=$?
t2=$(date +%s)
echo "e2e: tests took $((t2 - t1))s (exit $status); total $((t2 - t0))s"

# Nothing may outlive the tests.
after=$(pgrep -f "^$cache/" | sort || true)
leftover=$(comm -13 <(echo "$before") <(echo "$after") | grep . || true)
if [ -n "$leftover" ]; then
	echo "e2e: processes left behind:" >&2
	ps -o pid,args -p $(echo $leftover | tr ' ' ',') >&2 || true
	status=1
fi
exit "$status"

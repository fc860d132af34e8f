#!/usr/bin/env bash
# The project's test command (README "Develop"; CI runs it through .ci/run).
# Formatting, vet, golangci-lint, the unit, golden and fuzz-corpus tests, the race detector on the concurrent
# packages, one pass of every benchmark so they cannot rot, then the end-to-end scenarios against a
# real control plane and Jaeger (scripts/e2e.sh; the first run builds Kubernetes and Jaeger, 35-50
# minutes on 2 cores; KELEMETRY_SKIP_E2E=1 skips them for a quick local run).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './e2e/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== no large files in git (a binary left by go build in a command's folder)"
large=$(git ls-files -z 2>/dev/null | xargs -0 -r stat -c '%s %n' 2>/dev/null | awk '$1 > 2000000 {print $2 " (" $1 " bytes)"}')
if [ -n "$large" ]; then
  echo "tracked files over 2 MB:"; echo "$large"; exit 1
fi

echo "== go vet"
go vet ./...
go vet -tags e2e ./natsqueue/natse2e . # the multi-process tests scripts/e2e.sh runs

echo "== exported API surface (scripts/api-surface.sh: at most 1250 names: half of 2,307 on 2026-12-04, plus the three stores' ChangeFeed, plus the 37 of kube-apiserver's request traces (package audit/apitrace, the OTLP listener, the request span kind), plus the 29 of audit events as OTLP logs (packages audit/cloudlog and audit/otlplogs), plus the 25 of the Kafka source (package audit/kafka), plus queue.EnqueueParts, plus cloudlog.EKSCluster and EKSAuditStream)"
./scripts/api-surface.sh -max 1250

echo "== golangci-lint (.golangci.yml)"
./scripts/lint.sh

echo "== tsc --checkJs (frontend/ui/static)"
./scripts/tsc.sh

echo "== go test"
go test -count=1 ./...

echo "== go test -race (every package, the root package and examples/ included)"
go test -count=1 -race ./...

echo "== diff cache against a real (embedded) etcd (nested module e2e/etcdcache)"
(cd e2e/etcdcache && go vet ./... && go test -count=1 -race ./...)

echo "== image builder and Helm chart (nested module deploy/tools)"
(cd deploy/tools && go vet ./... && go test -count=1 ./...)

echo "== benchmarks compile and run once"
go test -count=1 -run '^$' -bench . -benchtime 1x ./... > /dev/null
echo "unit tests passed"

if [ "${KELEMETRY_SKIP_E2E:-}" = "1" ]; then
  echo "== end-to-end tests skipped (KELEMETRY_SKIP_E2E=1)"
else
  echo "== end-to-end tests against a real control plane"
  ./scripts/e2e.sh
fi
echo "all tests passed"

#!/usr/bin/env bash
# Ingest throughput into real Jaeger, and spans lost on the way: an ingest replica
# (--role ingest --store-backend jaeger) receives the bulk fixture N times (default 3) over its
# webhook (examples/auditload: events/s and events per CPU-second of the replica), writes over
# OTLP to Jaeger v1.76.0 (memory backend), and the spans Kelemetry exported are compared with the
# spans Jaeger's OTLP receiver accepted. Needs the Jaeger binary the e2e tier builds
# ($KELEMETRY_JAEGER_BIN, or jaeger in $KELEMETRY_E2E_CACHE or ~/.cache/kelemetry-e2e/bin; run
# ./scripts/e2e.sh once). Usage: scripts/bench-jaeger-ingest.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-3}
jaeger=${KELEMETRY_JAEGER_BIN:-${KELEMETRY_E2E_CACHE:-$HOME/.cache/kelemetry-e2e/bin}/jaeger}
[ -x "$jaeger" ] || { echo "no Jaeger binary at $jaeger: run ./scripts/e2e.sh once or set KELEMETRY_JAEGER_BIN" >&2; exit 1; }
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
otlp=$(port); remote=$(port); health=$(port); jmetrics=$(port); audit=$(port); api=$(port)

cat >"$work/jaeger.yaml" <<EOF
service:
  extensions: [jaeger_storage, remote_storage, healthcheckv2]
  pipelines:
    traces: {receivers: [otlp], exporters: [jaeger_storage_exporter]}
  telemetry:
    logs: {level: warn}
    metrics:
      level: basic
      readers:
        - pull: {exporter: {prometheus: {host: 127.0.0.1, port: $jmetrics}}}
extensions:
  healthcheckv2: {use_v2: true, http: {endpoint: "127.0.0.1:$health"}}
  jaeger_storage: {backends: {mem: {memory: {max_traces: 1000000}}}}
  remote_storage: {endpoint: "127.0.0.1:$remote", storage: mem}
receivers:
  otlp: {protocols: {grpc: {endpoint: "127.0.0.1:$otlp"}}}
exporters:
  jaeger_storage_exporter: {trace_storage: mem}
EOF
OTEL_TRACES_SAMPLER=always_off "$jaeger" --config="file:$work/jaeger.yaml" >"$work/jaeger.log" 2>&1 &
pids+=($!)
until curl -sf "http://127.0.0.1:$health/status" >/dev/null; do sleep 0.2; done

go build -o "$work/allinone" ./examples/allinone
go build -o "$work/auditload" ./examples/auditload
"$work/allinone" --role ingest --store-backend jaeger --jaeger-endpoint "127.0.0.1:$remote" \
	--jaeger-otlp-endpoint "127.0.0.1:$otlp" --audit-addr "127.0.0.1:$audit" --http-addr "127.0.0.1:$api" \
	--data-dir "$work/data" --log-level warn >"$work/kelemetry.log" 2>&1 &
kpid=$!
pids+=($kpid)
until curl -sf "http://127.0.0.1:$api/healthz" >/dev/null; do sleep 0.2; done

files=()
for _ in $(seq "$n"); do files+=(testdata/bulk/webhook-batches.jsonl.gz); done
"$work/auditload" --url "http://127.0.0.1:$audit/audit/bulk" --pid "$kpid" \
	--metrics-url "http://127.0.0.1:$api/metrics" "${files[@]}" | tee "$work/load.txt"

# Stop the replica: it flushes its OTLP queue; then compare with what Jaeger accepted.
sum() { awk -v name="$2" 'index($1, name) == 1 {s += $NF} END {printf "%.0f\n", s}' "$1"; }
curl -sf "http://127.0.0.1:$api/metrics" >"$work/k.metrics"
kill -TERM "$kpid"; wait "$kpid" || true
sleep 1
curl -sf "http://127.0.0.1:$jmetrics/metrics" >"$work/j.metrics"
exported=$(sum "$work/k.metrics" kelemetry_otlp_spans_exported)
dropped=$(sum "$work/k.metrics" kelemetry_otlp_spans_dropped)
accepted=$(sum "$work/j.metrics" otelcol_receiver_accepted_spans)
refused=$(sum "$work/j.metrics" otelcol_receiver_refused_spans)
echo "spans exported by Kelemetry before its final flush: $exported, dropped: $dropped"
echo "spans Jaeger's OTLP receiver accepted: $accepted, refused: $refused"
to_sinks=$(sum "$work/k.metrics" kelemetry_aggregator_spans)
markers=$(sum "$work/k.metrics" kelemetry_store_jaeger_cluster_markers)
echo "spans the aggregator handed to its sinks: $to_sinks, plus $markers cluster markers; lost: $((to_sinks + markers - accepted))"

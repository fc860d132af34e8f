#!/usr/bin/env bash
# Measures the all-in-one process the way users run it and prints one Markdown table: the bulk
# fixture posted N times (default 3) over the webhook by examples/auditload into a fresh process,
# in several setups, with the process's own CPU time and peak RSS from /proc, the events its
# consumer took and the spans that reached the store or Jaeger; then the Go benchmarks the
# README quotes. The setups with OTLP need the Jaeger binary the e2e tier builds
# ($KELEMETRY_JAEGER_BIN, or jaeger in $KELEMETRY_E2E_CACHE or ~/.cache/kelemetry-e2e/bin; run
# ./scripts/e2e.sh once); without it they are skipped.
#
# Usage: scripts/bench.sh [N]      (KELEMETRY_BENCH_SKIP_GO=1 leaves out the Go benchmarks;
#                                  KELEMETRY_BENCH_RUNS=K runs each setup K times, default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-3}
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# metric FILE NAME: the sum of a Prometheus metric family's samples.
metric() { awk -v name="$2" 'index($1, name) == 1 {s += $NF} END {printf "%.0f\n", s}' "$1"; }
# field FILE PATTERN FIELD: a number from auditload's output.
field() { grep -m1 "$2" "$1" | awk -v f="$3" '{print $f}' | tr -d ','; }

go build -o "$work/allinone" ./examples/allinone
go build -o "$work/auditload" ./examples/auditload
files=()
for _ in $(seq "$n"); do files+=(testdata/bulk/webhook-batches.jsonl.gz); done

jaeger=${KELEMETRY_JAEGER_BIN:-${KELEMETRY_E2E_CACHE:-$HOME/.cache/kelemetry-e2e/bin}/jaeger}
otlp="" remote="" jmetrics=""
if [ -x "$jaeger" ]; then
	otlp=$(port) remote=$(port) health=$(port) jmetrics=$(port)
	sed -e "s/{HEALTH}/$health/; s/{REMOTE}/$remote/; s/{OTLP}/$otlp/; s/{METRICS}/$jmetrics/" \
		testdata/jaeger/memory-backend.yaml >"$work/jaeger.yaml"
	OTEL_TRACES_SAMPLER=always_off "$jaeger" --config="file:$work/jaeger.yaml" >"$work/jaeger.log" 2>&1 &
	pids+=($!)
	until curl -sf "http://127.0.0.1:$health/status" >/dev/null; do sleep 0.2; done
else
	echo "no Jaeger binary at $jaeger: the OTLP setups are skipped" >&2
fi

rows=()
# Each setup runs $runs times (KELEMETRY_BENCH_RUNS, default 5): the machines are shared and a
# single run varies by 10-20%, so the table shows the median and the range of events per
# CPU-second, the highest peak RSS and what all runs lost.
runs=${KELEMETRY_BENCH_RUNS:-5}
# run NAME ARGS...: $runs fresh all-in-ones with ARGS, each loaded with the fixture, then stopped.
run() {
	local name=$1
	shift
	local i percpus=() maxrss=0 lostev=0 lostsp="" acc="" sinks=""
	for i in $(seq "$runs"); do
		once "$@"
		percpus+=("$perCPU")
		[ "$rss" -gt "$maxrss" ] && maxrss=$rss
		lostev=$((lostev + lostEvents))
		[ -n "$lostSpans" ] && lostsp=$(( ${lostsp:-0} + lostSpans ))
		acc=$accepted sinks=$tosinks
	done
	local sorted med
	sorted=$(printf '%s\n' "${percpus[@]}" | sort -n)
	med=$(echo "$sorted" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	local range
	range="$(echo "$sorted" | head -1)-$(echo "$sorted" | tail -1)"
	local lost="$lostev events"
	[ -n "$lostsp" ] && lost="$lost, $lostsp spans"
	rows+=("| $name | $acc | **$med** ($range) | $maxrss MiB | $sinks | $lost |")
	echo "measured: $name: $(echo "$sorted" | tr '\n' ' ')" >&2
}

# once ARGS...: one fresh all-in-one with ARGS, loaded with the fixture, then stopped; sets
# accepted, perCPU, rss, tosinks, lostEvents and lostSpans (empty without Jaeger).
once() {
	local audit api dir
	audit=$(port) api=$(port) dir="$work/data-$RANDOM"
	"$work/allinone" --audit-addr "127.0.0.1:$audit" --http-addr "127.0.0.1:$api" --log-level warn \
		--data-dir "$dir" "$@" >"$work/kelemetry.log" 2>&1 &
	local kpid=$!
	until curl -sf "http://127.0.0.1:$api/healthz" >/dev/null; do sleep 0.2; done
	local before=0
	[ -n "$jmetrics" ] && curl -sf "http://127.0.0.1:$jmetrics/metrics" >"$work/j0.metrics" && before=$(metric "$work/j0.metrics" otelcol_receiver_accepted_spans)
	"$work/auditload" --url "http://127.0.0.1:$audit/audit/bulk" --pid "$kpid" \
		--metrics-url "http://127.0.0.1:$api/metrics" "${files[@]}" >"$work/load.txt"
	curl -sf "http://127.0.0.1:$api/metrics" >"$work/k.metrics"
	kill -TERM "$kpid"
	wait "$kpid" || true
	local consumed repeats markers bad
	accepted=$(field "$work/load.txt" "events accepted" 3)
	perCPU=$(field "$work/load.txt" "server pid" 6)
	rss=$(field "$work/load.txt" "server pid" 12)
	consumed=$(metric "$work/k.metrics" kelemetry_audit_consumer_events)
	# Events posted again that the webhook answered without queueing (its repeat check).
	repeats=$(metric "$work/k.metrics" kelemetry_audit_webhook_repeated_events)
	tosinks=$(metric "$work/k.metrics" kelemetry_aggregator_spans)
	markers=$(metric "$work/k.metrics" kelemetry_store_jaeger_cluster_markers)
	# Events the consumer could not hand on (send_error, abandoned) count as lost too.
	bad=$( (grep '^kelemetry_audit_consumer_events' "$work/k.metrics" || true) | (grep -E 'send_error|abandoned' || true) | awk '{s += $NF} END {printf "%.0f\n", s}')
	lostEvents=$((accepted - consumed - repeats + bad))
	lostSpans=""
	if [ -n "$jmetrics" ] && [[ " $* " == *" --otlp-endpoint "* || " $* " == *" --jaeger-otlp-endpoint "* ]]; then
		sleep 1
		curl -sf "http://127.0.0.1:$jmetrics/metrics" >"$work/j.metrics"
		lostSpans=$((tosinks + markers - ($(metric "$work/j.metrics" otelcol_receiver_accepted_spans) - before)))
	fi
}

run "embedded store, field diffs and linkers on (default)"
run "embedded store, field diffs off" --diff-disable
run "memory store" --data-dir ""
if [ -n "$otlp" ]; then
	run "embedded store + OTLP sink into Jaeger" --otlp-endpoint "127.0.0.1:$otlp"
	run "jaeger backend (an ingest replica)" --role ingest --store-backend jaeger \
		--jaeger-endpoint "127.0.0.1:$remote" --jaeger-otlp-endpoint "127.0.0.1:$otlp"
fi
rss10=$(./scripts/measure-rss.sh 10 | sed -n 's/.*peak_rss=\([0-9]*\)MiB.*/\1/p')

echo
echo "Measured $(date -u +%Y-%m-%d) on $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) (scripts/bench.sh $n; $runs runs per setup: median, range)"
echo
echo "| setup (bulk fixture x$n over the webhook) | events accepted | events per CPU-second | peak RSS | spans to sinks | lost |"
echo "| --- | --- | --- | --- | --- | --- |"
printf '%s\n' "${rows[@]}"
echo "| all-in-one replaying the fixture 10 times into the embedded store | | | $rss10 MiB | | |"
if [ "${KELEMETRY_BENCH_SKIP_GO:-}" = "" ]; then
	echo
	echo '```'
	go test ./audit -run '^$' -bench 'DecodeEventList$' -benchmem -cpu 1 | grep Benchmark
	go test . -run '^$' -bench EndToEnd -benchmem -cpu 1 | grep Benchmark
	go test ./frontend -run '^$' -bench Deployment1000Pods -benchtime 10x -benchmem | grep Benchmark
	go test ./frontend -run '^$' -bench Deployment10000Pods -benchtime 3x -benchmem | grep Benchmark
	go test ./diff -run '^$' -bench 'Compare20KB|Snapshot20KB' -benchmem -cpu 1 | grep Benchmark
	go test ./linkrule -run '^$' -bench . -benchmem -cpu 1 | grep Benchmark
	go test ./kelemetrix -run '^$' -bench . -benchmem -cpu 1 | grep Benchmark
	echo '```'
fi

#!/usr/bin/env bash
# Measures the all-in-one process the way users run it and prints one Markdown table: the bulk
# fixture made into N distinct copies (default 3; examples/auditload --distinct: namespaces, audit
# IDs and UIDs renamed per copy, timestamps of the time of posting, as a cluster sends them) and
# posted over the webhook into a fresh process,
# in several setups, with the process's own CPU time and peak RSS from /proc, the events its
# consumer took and the spans that reached the store or Jaeger; then the Go benchmarks the
# docs/performance.md quotes. The setups with OTLP need the Jaeger binary the e2e tier builds
# ($KELEMETRY_JAEGER_BIN, or jaeger in $KELEMETRY_E2E_CACHE or ~/.cache/kelemetry-e2e/bin; run
# ./scripts/e2e.sh once); without it they are skipped.
#
# Usage: scripts/bench.sh [N]      (KELEMETRY_BENCH_SKIP_GO=1 leaves out the Go benchmarks;
#                                  KELEMETRY_BENCH_RUNS=K runs each setup K times, default 5;
#                                  KELEMETRY_BENCH_SKIP_INSTRUCTIONS=1 leaves out the instruction
#                                  count, which needs valgrind;
#                                  KELEMETRY_BENCH_SOAK=30m adds the soak: scripts/soak.sh at
#                                  KELEMETRY_BENCH_SOAK_RATE distinct events/s, default 2000, for
#                                  that long, with its flatness check and a peak RSS bound of
#                                  KELEMETRY_BENCH_SOAK_MAX_RSS MiB, default 350;
#                                  KELEMETRY_BENCH_CURVES=1 adds the cost curves: ingest and
#                                  large-tree queries with 0 to 10 million spans stored
#                                  (internal/tools/curves; about half an hour), drawn into
#                                  docs/images/performance-curves.svg)
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

go build -o "$work/kelemetry" ./cmd/kelemetry
go build -o "$work/auditload" ./examples/auditload
# The headline load: distinct events. The row "repeated postings" posts the same fixture N times
# instead (what a retried batch costs: the webhook answers a repeat without queueing it).
load=(--distinct --repeat "$n" testdata/bulk/webhook-batches.jsonl.gz)
repeated=(--repeat "$n" testdata/bulk/webhook-batches.jsonl.gz)

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
# CPU-second, the highest peak RSS and what all runs lost. The runs go round the setups (one of
# each, then the next round), so that a slow spell of the machine falls on every setup alike
# rather than on the setup that happens to run then.
runs=${KELEMETRY_BENCH_RUNS:-5}
names=() argsets=()
# setup NAME ARGS...: a setup of fresh all-in-ones started with ARGS.
setup() {
	names+=("$1")
	shift
	local quoted=""
	[ $# -gt 0 ] && quoted=$(printf '%q ' "$@")
	argsets+=("$quoted")
}
declare -A percpus maxrss lostev lostsp acc sinks
# measure: every setup $runs times, round by round, then one row per setup.
measure() {
	local r i
	for r in $(seq "$runs"); do
		for i in "${!names[@]}"; do
			loadargs=""
			if [[ "${argsets[$i]}" == LOAD=repeated* ]]; then
				loadargs=repeated
				eval "once ${argsets[$i]#LOAD=repeated}"
			else
				eval "once ${argsets[$i]}"
			fi
			percpus[$i]="${percpus[$i]:-} $perCPU"
			[ "$rss" -gt "${maxrss[$i]:-0}" ] && maxrss[$i]=$rss
			lostev[$i]=$(( ${lostev[$i]:-0} + lostEvents ))
			[ -n "$lostSpans" ] && lostsp[$i]=$(( ${lostsp[$i]:-0} + lostSpans ))
			acc[$i]=$accepted sinks[$i]=$tosinks
		done
	done
	for i in "${!names[@]}"; do
		local sorted med range lost
		sorted=$(printf '%s\n' ${percpus[$i]} | sort -n)
		med=$(echo "$sorted" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
		range="$(echo "$sorted" | head -1)-$(echo "$sorted" | tail -1)"
		lost="${lostev[$i]} events"
		[ -n "${lostsp[$i]:-}" ] && lost="$lost, ${lostsp[$i]} spans"
		rows+=("| ${names[$i]} | ${acc[$i]} | **$med** ($range) | ${maxrss[$i]} MiB | ${sinks[$i]} | $lost |")
		echo "measured: ${names[$i]}: $(echo "$sorted" | tr '\n' ' ')" >&2
	done
}

# once ARGS...: one fresh all-in-one with ARGS, loaded with the fixture (the auditload arguments
# of $loadargs, default the distinct load), then stopped; sets accepted, perCPU, rss, tosinks,
# lostEvents and lostSpans (empty without Jaeger).
once() {
	local audit api dir
	audit=$(port) api=$(port) dir="$work/data-$RANDOM"
	"$work/kelemetry" --audit-addr "127.0.0.1:$audit" --http-addr "127.0.0.1:$api" --log-level warn \
		--data-dir "$dir" "$@" >"$work/kelemetry.log" 2>&1 &
	local kpid=$!
	until curl -sf "http://127.0.0.1:$api/healthz" >/dev/null; do sleep 0.2; done
	local before=0
	[ -n "$jmetrics" ] && curl -sf "http://127.0.0.1:$jmetrics/metrics" >"$work/j0.metrics" && before=$(metric "$work/j0.metrics" otelcol_receiver_accepted_spans)
	local largs=("${load[@]}")
	[ "${loadargs:-}" = repeated ] && largs=("${repeated[@]}")
	"$work/auditload" --url "http://127.0.0.1:$audit/audit/bulk" --pid "$kpid" \
		--metrics-url "http://127.0.0.1:$api/metrics" "${largs[@]}" >"$work/load.txt"
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

setup "embedded store, field diffs and linkers on (default)"
setup "the default, the same fixture posted $n times (repeated postings: a retried batch)" LOAD=repeated
setup "embedded store, field diffs off" --diff-disable
setup "memory store" --data-dir ""
if [ -n "$otlp" ]; then
	setup "embedded store + OTLP sink into Jaeger" --otlp-endpoint "127.0.0.1:$otlp"
	setup "jaeger backend (an ingest replica)" --role ingest --store-backend jaeger \
		--jaeger-endpoint "127.0.0.1:$remote" --jaeger-otlp-endpoint "127.0.0.1:$otlp"
fi
# The machine's speed while the setups ran: the diff benchmark of two 20 KB objects (pure CPU),
# before and after them. On shared machines it moves by up to two times from hour to hour
# (93 us in a fast hour of the machine the figures of docs/performance.md come from, 215 us in a slow one);
# the process's figures move by as much, though not always in step with it (the process
# also waits on memory, the disk and the other cores), so the table states it as a rough gauge.
go test -c -o "$work/diff.test" ./internal/objdiff
speed() { "$work/diff.test" -test.run '^$' -test.bench 'Compare20KB$' -test.benchtime 3000x -test.cpu 1 |
	awk '/^BenchmarkCompare20KB/ {printf "%.0f", $3 / 1000}'; }
# The hypervisor's steal time over a stretch, from /proc/stat: of the time the cores had work,
# the share in which they waited while the host ran another guest. The other gauge of a slow
# hour: wall-clock figures (the Go benchmarks' ns/op and max-ms) grow with it.
cpustat() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9, $9}' /proc/stat; }
steal() { awk -v a="$1" -v b="$2" 'BEGIN {split(a, x, " "); split(b, y, " "); d = y[1] - x[1]; s = 0; if (d > 0) s = 100 * (y[2] - x[2]) / d; printf "%.1f%%", s}'; }
speed0=$(speed)
stat0=$(cpustat)
measure
stat1=$(cpustat)
speed1=$(speed)
rss10=$(./scripts/measure-rss.sh 10 | sed -n 's/.*peak_rss=\([0-9]*\)MiB.*/\1/p')

echo
echo "Measured $(date -u "+%Y-%m-%d %H:%M UTC") on $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) (scripts/bench.sh $n; $runs rounds of the setups: median, range; machine speed: Compare20KB $speed0 us before, $speed1 us after; steal time during the setups $(steal "$stat0" "$stat1"))"
echo
echo "| setup (bulk fixture, $n distinct copies over the webhook) | events accepted | distinct events per CPU-second | peak RSS | spans to sinks | lost |"
echo "| --- | --- | --- | --- | --- | --- |"
printf '%s\n' "${rows[@]}"
echo "| all-in-one replaying the fixture 10 times into the embedded store | | | $rss10 MiB | | |"
# The same work counted in instructions (callgrind), which repeat to about 1% whatever the machine
# is doing: what a change of the code saves shows there when the machine's speed hides it.
if [ "${KELEMETRY_BENCH_SKIP_INSTRUCTIONS:-}" = "" ] && command -v valgrind >/dev/null; then
	echo
	echo "User-space instructions of the default setup (scripts/instructions.sh $n): $(./scripts/instructions.sh "$n")"
fi
if [ -n "${KELEMETRY_BENCH_CURVES:-}" ]; then
	echo
	go build -o "$work/curves" ./internal/tools/curves
	jarg=()
	# Jaeger on Badger takes spans at a few thousand per second: its curve stops at 1 million
	# unless KELEMETRY_BENCH_CURVES_JAEGER_POINTS says more (0,1000000,10000000: an hour more).
	[ -x "$jaeger" ] && jarg=(--jaeger "$jaeger" --jaeger-points "${KELEMETRY_BENCH_CURVES_JAEGER_POINTS:-0,1000000}")
	echo "Cost curves (internal/tools/curves, $(date -u "+%Y-%m-%d %H:%M UTC"), picture docs/images/performance-curves.svg):"
	echo
	"$work/curves" --kelemetry "$work/kelemetry" --auditload "$work/auditload" --copies "$n" --work "$work/curves-data" \
		"${jarg[@]}" --svg docs/images/performance-curves.svg testdata/bulk/webhook-batches.jsonl.gz
fi
if [ -n "${KELEMETRY_BENCH_SOAK:-}" ]; then
	echo
	echo "Soak (scripts/soak.sh -d $KELEMETRY_BENCH_SOAK -r ${KELEMETRY_BENCH_SOAK_RATE:-2000}):"
	echo '```'
	./scripts/soak.sh -d "$KELEMETRY_BENCH_SOAK" -r "${KELEMETRY_BENCH_SOAK_RATE:-2000}" -m "${KELEMETRY_BENCH_SOAK_MAX_RSS:-350}" -o "$work/soak" 2>&1 |
		grep -E '^(events accepted|server pid|RSS|Go heap after|store size|flatness|  (RSS|Go heap in use|goroutines|open files|webhook p99) |soak:)' || true
	echo '```'
fi
if [ "${KELEMETRY_BENCH_SKIP_GO:-}" = "" ]; then
	echo
	stat2=$(cpustat)
	echo '```'
	go test ./audit/auditv1 -run '^$' -bench 'DecodeEventList$' -benchmem -cpu 1 | grep Benchmark
	go test . -run '^$' -bench EndToEnd -benchmem -cpu 1 | grep Benchmark
	go test ./internal/query -run '^$' -bench Deployment1000Pods -benchtime 10x -benchmem | grep Benchmark
	go test ./internal/query -run '^$' -bench Deployment10000Pods -benchtime 3x -benchmem | grep Benchmark
	go test ./internal/objdiff -run '^$' -bench 'Compare20KB|Snapshot20KB' -benchmem -cpu 1 | grep Benchmark
	go test ./linkrule -run '^$' -bench . -benchmem -cpu 1 | grep Benchmark
	go test ./kelemetrix -run '^$' -bench . -benchmem -cpu 1 | grep Benchmark
	echo '```'
	echo "Steal time during the Go benchmarks (which include building them): $(steal "$stat2" "$(cpustat)")"
fi

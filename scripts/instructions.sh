#!/usr/bin/env bash
# Counts the user-space instructions the all-in-one (default setup: embedded store, field diffs
# and linkers) executes to take N distinct copies of the bulk fixture (default 3; auditload
# --distinct, as bench.sh's headline) over the webhook, under
# valgrind's callgrind: counters zeroed once the process is up, dumped once its queues drained.
# Unlike events per CPU-second, which moves by 10-40% with the load of a shared machine, the count
# repeats to within about 3%, so it shows what a change of the code costs or saves. It leaves out
# the kernel's work (system calls, page faults: about a quarter of the process's CPU time) and
# weighs instructions alike whatever their speed, so compare it with itself only. Each measurement
# runs K times (default 2) and the smallest count is the figure: under callgrind the process runs
# about 50 times slower, and now and then the scheduler's timers and idle spinning add 40% or more
# to a run (seen in 3 of about 20 runs), which is work of the measurement, not of the load.
#
# Usage: scripts/instructions.sh [N] [K]   (needs valgrind: Debian package valgrind; a minute a run;
#                                         KELEMETRY_CALLGRIND_OUT=FILE keeps the smallest run's
#                                         profile for callgrind_annotate)
# Prints: instructions=<smallest> events=<accepted> per_event=<instructions per accepted event>
#         runs=<every count> retried_batches=<batches auditload posted again after a 429/503>
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-3}
runs=${2:-2}
command -v valgrind >/dev/null && command -v callgrind_control >/dev/null ||
	{ echo "instructions.sh: valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
work=$(mktemp -d)
pid=""
cleanup() {
	[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
go build -o "$work/kelemetry" ./cmd/kelemetry
go build -o "$work/auditload" ./examples/auditload
files=(--distinct --repeat "$n" testdata/bulk/webhook-batches.jsonl.gz)

# once: one measured run; sets total, events and retried.
once() {
	local audit api
	audit=$(port) api=$(port)
	rm -rf "$work/data" "$work"/cg*
	# Go's asynchronous preemption signals upset callgrind; the process runs as usual otherwise.
	GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --callgrind-out-file="$work/cg" --dump-instr=no \
		"$work/kelemetry" --audit-addr "127.0.0.1:$audit" --http-addr "127.0.0.1:$api" --log-level warn \
		--data-dir "$work/data" >"$work/log" 2>&1 &
	pid=$!
	until curl -sf "http://127.0.0.1:$api/healthz" >/dev/null; do
		kill -0 "$pid" 2>/dev/null || { cat "$work/log" >&2; exit 1; }
		sleep 0.5
	done
	sleep 2 # start-up work still running (metrics, the first retention check)
	callgrind_control -z "$pid" >/dev/null 2>&1
	# The drain is watched through /metrics, whose every read costs the server work: under
	# callgrind the drain takes a minute or so, so the reads are made rare.
	"$work/auditload" --url "http://127.0.0.1:$audit/audit/bulk" --settle 10m --settle-interval 10s \
		--metrics-url "http://127.0.0.1:$api/metrics" "${files[@]}" >"$work/load.txt"
	callgrind_control -d "$pid" >/dev/null 2>&1
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	pid=""
	total=$(awk '/^totals:/ {print $2}' "$work"/cg.*)
	events=$(awk '/events accepted/ {print $3}' "$work/load.txt")
	retried=$(awk '/events accepted/ {gsub(/[(,]/, ""); for (i = 1; i <= NF; i++) if ($i == "retried") print $(i-1)}' "$work/load.txt")
	[ -n "$total" ] && [ -n "$events" ] || { echo "instructions.sh: no count" >&2; cat "$work/log" "$work/load.txt" >&2; exit 1; }
}

counts=() best="" bestEvents="" retriedAll=0
for _ in $(seq "$runs"); do
	once
	counts+=("$total")
	retriedAll=$((retriedAll + ${retried:-0}))
	if [ -z "$best" ] || [ "$total" -lt "$best" ]; then
		best=$total bestEvents=$events
		[ -n "${KELEMETRY_CALLGRIND_OUT:-}" ] && cat "$work"/cg.* >"$KELEMETRY_CALLGRIND_OUT"
	fi
done
echo "instructions=$best events=$bestEvents per_event=$((best / bestEvents)) runs=$(IFS=,; echo "${counts[*]}") retried_batches=$retriedAll"

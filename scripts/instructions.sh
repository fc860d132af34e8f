#!/usr/bin/env bash
# Counts the user-space instructions the all-in-one (default setup: embedded store, field diffs
# and linkers) executes to take the bulk fixture posted N times (default 3) over the webhook, under
# valgrind's callgrind: counters zeroed once the process is up, dumped once its queues drained.
# Unlike events per CPU-second, which moves by 10-40% with the load of a shared machine, the count
# repeats to within about 1% (thread interleaving moves garbage collection a little), so it shows
# what a change of the code costs or saves. It leaves out the kernel's work (system calls, page
# faults: about a quarter of the process's CPU time) and weighs instructions alike whatever their
# speed, so compare it with itself only.
#
# Usage: scripts/instructions.sh [N]      (needs valgrind: Debian package valgrind; about a minute)
# Prints: instructions=<total> events=<accepted> per_event=<instructions per accepted event>
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-3}
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
go build -o "$work/allinone" ./examples/allinone
go build -o "$work/auditload" ./examples/auditload
files=()
for _ in $(seq "$n"); do files+=(testdata/bulk/webhook-batches.jsonl.gz); done
audit=$(port) api=$(port)
# Go's asynchronous preemption signals upset callgrind; the process is measured as it runs
# otherwise.
GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --callgrind-out-file="$work/cg" --dump-instr=no \
	"$work/allinone" --audit-addr "127.0.0.1:$audit" --http-addr "127.0.0.1:$api" --log-level warn \
	--data-dir "$work/data" >"$work/log" 2>&1 &
pid=$!
until curl -sf "http://127.0.0.1:$api/healthz" >/dev/null; do
	kill -0 "$pid" 2>/dev/null || { cat "$work/log" >&2; exit 1; }
	sleep 0.5
done
sleep 2 # start-up work still running (metrics, the first retention check)
callgrind_control -z "$pid" >/dev/null 2>&1
# The drain is watched through /metrics, whose every read costs the server work: under callgrind
# the drain takes a minute or so, so the reads are made rare (a handful, counted alike every run).
"$work/auditload" --url "http://127.0.0.1:$audit/audit/bulk" --settle 10m --settle-interval 10s \
	--metrics-url "http://127.0.0.1:$api/metrics" "${files[@]}" >"$work/load.txt"
callgrind_control -d "$pid" >/dev/null 2>&1
total=$(awk '/^totals:/ {print $2}' "$work"/cg.*)
events=$(awk '/events accepted/ {print $3}' "$work/load.txt")
[ -n "$total" ] && [ -n "$events" ] || { echo "instructions.sh: no count (see $work/log)" >&2; cat "$work/load.txt" >&2; exit 1; }
echo "instructions=$total events=$events per_event=$((total / events))"

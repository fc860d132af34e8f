#!/usr/bin/env bash
# Peak RSS and throughput of the all-in-one while it replays the bulk fixture N times (default 10)
# into the embedded store. Usage: scripts/measure-rss.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10}
bin=$(mktemp -d)/kelemetry
data=$(mktemp -d)
go build -o "$bin" ./cmd/kelemetry
args=()
for _ in $(seq "$n"); do args+=(--replay testdata/bulk/audit.jsonl.gz); done
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
start=$(date +%s.%N)
"$bin" --data-dir "$data" --audit-addr 127.0.0.1:0 --http-addr "127.0.0.1:$port" --log-level warn "${args[@]}" &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$data" "$(dirname "$bin")"' EXIT
# Done once every file is read and flushed: the replay's own "done", not a file's.
replay_done() {
	curl -sf "http://127.0.0.1:$port/healthz" |
		python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)["replay"]["done"] else 1)' 2>/dev/null
}
until replay_done; do
	kill -0 $pid 2>/dev/null || { echo "measure-rss: the all-in-one exited before its replay was done" >&2; exit 1; }
	sleep 0.2
done
end=$(date +%s.%N)
hwm=$(awk '/VmHWM/ {print $2}' /proc/$pid/status)
cpu=$(awk '{print ($14+$15)/100}' /proc/$pid/stat)
events=$(curl -sf "http://127.0.0.1:$port/healthz" | python3 -c '
import json, sys
r = json.load(sys.stdin)["replay"]
if r.get("error"):
    sys.exit("measure-rss: the replay failed: " + r["error"])
print(sum(f["events"] for f in r["files"]))')
kill -TERM $pid; wait $pid || true
python3 - "$n" "$events" "$start" "$end" "$hwm" "$cpu" <<'PY'
import sys
n, events, start, end, hwm, cpu = sys.argv[1:]
wall = float(end) - float(start)
print(f"replays={n} events={events} wall={wall:.1f}s cpu={float(cpu):.1f}s "
      f"events/s(wall)={int(events)/wall:,.0f} events/cpu-second={int(events)/float(cpu):,.0f} peak_rss={int(hwm)/1024:.0f}MiB")
PY

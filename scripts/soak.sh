#!/usr/bin/env bash
# Soak: the all-in-one on its default configuration with a data folder (embedded store, durable
# audit queue), fed distinct audit events (examples/auditload --distinct: every pass over the bulk
# fixture renamed, with new audit IDs and UIDs and current timestamps, as a real cluster sends them)
# at a fixed rate for a fixed time. Every few seconds it samples the process's RSS (VmRSS), Go heap
# in use, goroutines, open files, the webhook's answer times (its
# kelemetry_audit_webhook_duration_seconds histogram) and the CPU time it has used (at a fixed
# rate, the cores it uses over a stretch are its CPU per event). At the end it prints the peak and final RSS,
# the Go heap after a forced GC with its largest holders (a heap profile from the process's
# --pprof-addr, bound to 127.0.0.1), and the flatness check: after the warm-up, the mean of each
# figure over the last stretch (and the webhook's p99 over it) against the first stretch after the
# warm-up; a figure that grew by more than 10% fails the check. It exits 1 when the peak RSS
# exceeds the bound or a figure grew. Everything it sends goes to 127.0.0.1; it stops by itself
# after the duration (plus up to two minutes for the queue to drain).
#
# Usage: scripts/soak.sh [-d DURATION] [-r EVENTS_PER_S] [-m MAX_RSS_MIB] [-i SAMPLE_S] [-w WARMUP] [-o OUT_DIR] [-- ALLINONE_ARGS...]
#   -d  how long to post (default 15m; Go duration syntax)
#   -r  distinct events per second (default 600)
#   -m  the peak RSS bound in MiB (default 300)
#   -i  seconds between samples (default 5)
#   -w  the warm-up left out of the flatness check (default a third of the duration; the stretches
#       compared are each a quarter of what follows it)
#   -o  folder for the samples, heap profile, metrics and logs (default: a new temporary folder,
#       kept and printed)
# Arguments after -- go to the all-in-one (e.g. --config FILE). GOGC and GOMEMLIMIT in the
# environment reach it as usual.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=15m rate=600 bound=300 interval=5 warmup="" out=""
while getopts "d:r:m:i:w:o:h" opt; do
	case $opt in
	d) duration=$OPTARG ;;
	r) rate=$OPTARG ;;
	m) bound=$OPTARG ;;
	i) interval=$OPTARG ;;
	w) warmup=$OPTARG ;;
	o) out=$OPTARG ;;
	*) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift
out=${out:-$(mktemp -d -t kelemetry-soak.XXXXXX)}
mkdir -p "$out"
work=$(mktemp -d -t kelemetry-soak-work.XXXXXX)
kpid="" spid=""
cleanup() {
	[ -n "$spid" ] && kill "$spid" 2>/dev/null || true
	if [ -n "$kpid" ] && kill -0 "$kpid" 2>/dev/null; then
		kill -TERM "$kpid" 2>/dev/null || true
		wait "$kpid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# metric FILE NAME: the sum of a Prometheus metric family's samples.
metric() { awk -v name="$2" '$1 == name || index($1, name "{") == 1 {s += $NF} END {printf "%.0f\n", s}' "$1"; }
mib() { awk -v b="$1" 'BEGIN {printf "%.0f", b / 1048576}'; }
# seconds DURATION: a Go duration (1h30m, 15m, 90s) in whole seconds.
seconds() { python3 -c '
import re, sys
units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
print(int(sum(float(n) * units[u] for n, u in re.findall(r"([0-9.]+)(ms|h|m|s)", sys.argv[1]))))' "$1"; }

go build -o "$work/kelemetry" ./cmd/kelemetry
go build -o "$work/auditload" ./examples/auditload
audit=$(port) api=$(port) pprof=$(port)
"$work/kelemetry" --data-dir "$work/data" --audit-addr "127.0.0.1:$audit" --http-addr "127.0.0.1:$api" \
	--pprof-addr "127.0.0.1:$pprof" --log-level warn "$@" >"$out/allinone.log" 2>&1 &
kpid=$!
for _ in $(seq 300); do
	curl -sf "http://127.0.0.1:$api/healthz" >/dev/null && break
	kill -0 "$kpid" 2>/dev/null || { echo "soak: the all-in-one exited at start:" >&2; cat "$out/allinone.log" >&2; exit 1; }
	sleep 0.2
done

# Samples, one line each: seconds since the start, VmRSS in KiB, Go heap in use in bytes,
# goroutines, open files, the process's CPU time in seconds (user and system), then the webhook
# duration histogram's cumulative buckets (le=count,...; absent until its first request).
ticks=$(getconf CLK_TCK)
: >"$out/samples.txt" # an -o folder used before holds an earlier run's samples
(
	t0=$(date +%s)
	while kill -0 "$kpid" 2>/dev/null; do
		rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$kpid/status" 2>/dev/null || true)
		cpu=$(awk -v hz="$ticks" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$kpid/stat" 2>/dev/null || true)
		if [ -n "$rss" ] && [ -n "$cpu" ] && curl -sf "http://127.0.0.1:$api/metrics" >"$work/sample.metrics" 2>/dev/null; then
			awk -v t="$(($(date +%s) - t0))" -v rss="$rss" -v cpu="$cpu" '
				$1 == "go_memstats_heap_inuse_bytes" {heap = $2}
				$1 == "go_goroutines" {g = $2}
				$1 == "process_open_fds" {fds = $2}
				index($1, "kelemetry_audit_webhook_duration_seconds_bucket{") == 1 {
					match($1, /le="[^"]*"/); le = substr($1, RSTART + 4, RLENGTH - 5); b[le] += $2; if (!(le in seen)) {seen[le] = 1; order[++n] = le}
				}
				END {
					line = t " " rss " " heap " " g " " fds " " cpu " "
					for (i = 1; i <= n; i++) line = line (i > 1 ? "," : "") order[i] "=" b[order[i]]
					print line
				}' "$work/sample.metrics" >>"$out/samples.txt"
		fi
		sleep "$interval"
	done
) &
spid=$!

echo "soak: $rate distinct events/s for $duration into pid $kpid (data $work/data, API http://127.0.0.1:$api, pprof http://127.0.0.1:$pprof); output in $out" >&2
status=0
# The load stops by itself after the duration and at most 2 minutes of drain; timeout guards it.
timeout --signal=INT "$(($(seconds "$duration") + 300))" \
	"$work/auditload" --url "http://127.0.0.1:$audit/audit/soak" --distinct --rate "$rate" --duration "$duration" \
	--batch 100 --workers 4 --progress 60s --metrics-url "http://127.0.0.1:$api/metrics" --settle 2m \
	--settle-interval 2s testdata/bulk/audit.jsonl.gz | tee "$out/auditload.txt" || status=$?
[ "$status" -ne 0 ] && echo "soak: auditload exited $status" >&2

sleep "$interval"
kill "$spid" 2>/dev/null || true
wait "$spid" 2>/dev/null || true
spid=""
kill -0 "$kpid" 2>/dev/null || { echo "soak: the all-in-one died; its log:" >&2; tail -20 "$out/allinone.log" >&2; exit 1; }
hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$kpid/status")
final=$(awk '/^VmRSS:/ {print $2}' "/proc/$kpid/status")
peak=$(awk -v h="$hwm" '$2 > h {h = $2} END {print h}' "$out/samples.txt")
curl -sf "http://127.0.0.1:$api/metrics" >"$out/metrics.txt"
# The heap profile after a forced GC (gc=1): live heap and its holders.
curl -sf "http://127.0.0.1:$pprof/debug/pprof/heap?gc=1" -o "$out/heap.pprof"
curl -sf "http://127.0.0.1:$api/metrics" >"$out/metrics-after-gc.txt"
curl -sf "http://127.0.0.1:$api/healthz" >"$out/healthz.json" || true

echo
echo "== soak: $rate distinct events/s for $duration, all-in-one defaults with a data folder $*"
grep -E '^(events accepted|wall time|server pid|spans stored|consumer events|repeats skipped|settle)' "$out/auditload.txt" || true
echo "RSS peak          $((peak / 1024)) MiB (VmHWM $((hwm / 1024)) MiB; bound $bound MiB)"
echo "RSS final         $((final / 1024)) MiB (after the load and the drain)"
echo "RSS over time     $(awk -v every="$(( (120 + interval - 1) / interval ))" 'NR % every == 1 {printf "%ds:%dMiB ", $1, $2 / 1024}' "$out/samples.txt")"
m=$out/metrics-after-gc.txt
echo "Go heap after GC  live $(mib "$(metric "$m" go_memstats_heap_alloc_bytes)") MiB, in use $(mib "$(metric "$m" go_memstats_heap_inuse_bytes)") MiB, idle $(mib "$(metric "$m" go_memstats_heap_idle_bytes)") MiB (released $(mib "$(metric "$m" go_memstats_heap_released_bytes)") MiB), Go sys $(mib "$(metric "$m" go_memstats_sys_bytes)") MiB, GOGC $(metric "$m" go_gc_gogc_percent), GOMEMLIMIT $(mib "$(metric "$m" go_gc_gomemlimit_bytes)") MiB"
echo "Go heap before GC in use $(mib "$(metric "$out/metrics.txt" go_memstats_heap_inuse_bytes)") MiB, next GC at $(mib "$(metric "$out/metrics.txt" go_memstats_next_gc_bytes)") MiB"
echo "store size        $(mib "$(metric "$m" kelemetry_store_size_bytes)") MiB; audit queue on disk $(mib "$(metric "$m" kelemetry_audit_queue_disk_bytes)") MiB"
echo "largest live heap holders (go tool pprof -sample_index=inuse_space -top $out/heap.pprof):"
go tool pprof -sample_index=inuse_space -top -nodecount=15 "$out/heap.pprof" 2>/dev/null | sed -n '/^Showing\|flat%/,$p' | head -18 | sed 's/^/  /'
# The flatness check over the samples taken while posting (the drain at the end left out).
secs=$(seconds "$duration")
warm=$(seconds "${warmup:-$((secs / 3))s}")
flat=0
python3 - "$out/samples.txt" "$warm" "$secs" <<'PY' || flat=$?
import sys

path, warm, end = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = []
for line in open(path):
    f = line.split()
    if len(f) < 7:
        continue
    buckets = []
    for kv in f[6].split(","):
        le, n = kv.split("=")
        buckets.append((float("inf") if le == "+Inf" else float(le), float(n)))
    rows.append((int(f[0]), float(f[1]) / 1024, float(f[2]) / 1048576, float(f[3]), float(f[4]), sorted(buckets), float(f[5])))
rows = [r for r in rows if r[0] <= end]
after = [r for r in rows if r[0] >= warm]
if len(after) < 8:
    print(f"flatness: only {len(after)} samples after the warm-up of {warm}s: not checked")
    sys.exit(0)
q = max(2, len(after) // 4)
first, last = after[:q], after[-q:]

def mean(rs, i):
    return sum(r[i] for r in rs) / len(rs)

def p99(rs):
    # The webhook's p99 over a stretch, from the histogram's counts at its end minus those at its
    # start, interpolated within the bucket it falls in (as Prometheus's histogram_quantile).
    a, b = dict(rs[0][5]), dict(rs[-1][5])
    bounds = sorted(b)
    total = b[bounds[-1]] - a.get(bounds[-1], 0)
    if total <= 0:
        return 0.0
    rank, lo, below = 0.99 * total, 0.0, 0.0
    for le in bounds:
        n = b[le] - a.get(le, 0)
        if n >= rank:
            if le == float("inf"):
                return lo * 1000
            return (lo + (le - lo) * (rank - below) / max(n - below, 1e-9)) * 1000
        lo, below = le, n
    return lo * 1000

def cores(rs):
    # The cores used over a stretch: CPU time at its end minus at its start, over its length.
    return (rs[-1][6] - rs[0][6]) / max(rs[-1][0] - rs[0][0], 1)

span = lambda rs: f"{rs[0][0]}-{rs[-1][0]}s"
print(f"flatness after a warm-up of {warm}s: the first stretch ({span(first)}) against the last ({span(last)}); bound +10%")
bad = []
for name, a, b, unit in [
    ("RSS", mean(first, 1), mean(last, 1), "MiB"),
    ("Go heap in use", mean(first, 2), mean(last, 2), "MiB"),
    ("goroutines", mean(first, 3), mean(last, 3), ""),
    ("open files", mean(first, 4), mean(last, 4), ""),
    ("webhook p99", p99(first), p99(last), "ms"),
    ("CPU (cores)", cores(first), cores(last), ""),
]:
    growth = (b - a) / a * 100 if a > 0 else 0.0
    ok = growth <= 10
    print(f"  {name:27s} {a:9.2f} -> {b:9.2f} {unit:3s} {growth:+6.1f}%  {'flat' if ok else 'GREW'}")
    if not ok:
        bad.append(name)
if bad:
    print("flatness: FAIL: " + ", ".join(bad) + " grew by more than 10%")
    sys.exit(1)
print("flatness: ok")
PY
echo "files: $out"
if [ "$((peak / 1024))" -gt "$bound" ]; then
	echo "soak: FAIL: peak RSS $((peak / 1024)) MiB > $bound MiB" >&2
	exit 1
fi
[ "$flat" -eq 0 ] || { echo "soak: FAIL: not flat" >&2; exit 1; }
[ "$status" -eq 0 ] || exit 1
echo "soak: ok: peak RSS $((peak / 1024)) MiB <= $bound MiB, flat after the warm-up"

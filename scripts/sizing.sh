#!/usr/bin/env bash
# Sizing: what a replica needs per 1,000 audit events per second, at a steady paced load of
# distinct events (examples/auditload --distinct --rate, batches of 400 events as kube-apiserver
# sends them from a busy cluster), for the table of docs/operations/scaling.md:
#   1. the all-in-one on its defaults with a data folder (embedded store, durable queue);
#   2. an ingest replica (--role ingest --store-backend jaeger) writing into Jaeger on Badger
#      (testdata/jaeger/badger-backend.yaml; needs the Jaeger binary the e2e tier builds,
#      $KELEMETRY_JAEGER_BIN or ~/.cache/kelemetry-e2e/bin/jaeger), and Jaeger itself;
#   3. a linker worker (examples/linkerworker: its VolumesLinker answers the all-in-one's link
#      jobs over NATS, --remote-linker volumes; nats-server built from the Go module cache).
# For each: the cores used (CPU-seconds over the wall time of the load and its drain) per 1,000
# events/s, the peak RSS, and the bytes on disk per event (the data folder, or Badger's folders,
# after the process stopped).
#
# Usage: scripts/sizing.sh [-r EVENTS_PER_S] [-d DURATION]   (defaults 2000, 3m)
set -euo pipefail
cd "$(dirname "$0")/.."
rate=2000 duration=3m
while getopts "r:d:h" opt; do
	case $opt in
	r) rate=$OPTARG ;;
	d) duration=$OPTARG ;;
	*) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
	esac
done
work=$(mktemp -d -t kelemetry-sizing.XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu() { awk '{printf "%.2f\n", ($14 + $15) / 100}' "/proc/$1/stat"; }
hwm() { awk '/^VmHWM:/ {printf "%.0f\n", $2 / 1024}' "/proc/$1/status"; }
field() { grep -m1 "$2" "$1" | awk -v f="$3" '{print $f}' | tr -d ','; }

go build -o "$work/kelemetry" ./cmd/kelemetry
go build -o "$work/auditload" ./examples/auditload
rows=()

# load PID AUDIT API NAME: posts the paced load into the process; sets events, cores, wall.
load() {
	local t0 c0 c1 t1
	c0=$(cpu "$1")
	t0=$(date +%s.%N)
	"$work/auditload" --url "http://127.0.0.1:$2/audit/sizing" --pid "$1" --metrics-url "http://127.0.0.1:$3/metrics" \
		--distinct --rate "$rate" --duration "$duration" --batch 400 --workers 4 --settle 2m --settle-interval 1s \
		testdata/bulk/webhook-batches.jsonl.gz >"$work/load-$4.txt"
	t1=$(date +%s.%N)
	c1=$(cpu "$1")
	events=$(field "$work/load-$4.txt" "events accepted" 3)
	wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')
	cores=$(awk -v a="$c0" -v b="$c1" -v w="$wall" 'BEGIN {printf "%.3f", (b - a) / w}')
}
per1k() { awk -v c="$1" -v r="$rate" 'BEGIN {printf "%.3f", c / r * 1000}'; }

# 1. The all-in-one, embedded store.
audit=$(port) api=$(port)
"$work/kelemetry" --data-dir "$work/data" --audit-addr "127.0.0.1:$audit" --http-addr "127.0.0.1:$api" --log-level warn >"$work/allinone.log" 2>&1 &
kpid=$!
pids+=("$kpid")
until curl -sf "http://127.0.0.1:$api/healthz" >/dev/null; do sleep 0.2; done
load "$kpid" "$audit" "$api" allinone
rss=$(hwm "$kpid")
kill -TERM "$kpid"
wait "$kpid" || true
# The store's files (the durable queue's folder is empty once drained).
bytes=$(du -sb --exclude=audit-queue "$work/data" | awk '{print $1}')
rows+=("| all-in-one (embedded store, field diffs, linkers) | $cores | **$(per1k "$cores")** | $rss MiB | $(awk -v b="$bytes" -v e="$events" 'BEGIN {printf "%.0f", b / e}') B (store folder) |")

# 2. An ingest replica into Jaeger on Badger.
jaeger=${KELEMETRY_JAEGER_BIN:-${KELEMETRY_E2E_CACHE:-$HOME/.cache/kelemetry-e2e/bin}/jaeger}
if [ -x "$jaeger" ]; then
	health=$(port) remote=$(port) otlp=$(port) metrics=$(port)
	sed -e "s|{DIR}|$work/badger|g; s/{HEALTH}/$health/; s/{REMOTE}/$remote/; s/{OTLP}/$otlp/; s/{METRICS}/$metrics/" \
		testdata/jaeger/badger-backend.yaml >"$work/jaeger.yaml"
	OTEL_TRACES_SAMPLER=always_off "$jaeger" --config="file:$work/jaeger.yaml" >"$work/jaeger.log" 2>&1 &
	jpid=$!
	pids+=("$jpid")
	until curl -sf "http://127.0.0.1:$health/status" >/dev/null; do sleep 0.2; done
	audit=$(port) api=$(port)
	"$work/kelemetry" --role ingest --store-backend jaeger --jaeger-endpoint "127.0.0.1:$remote" --jaeger-otlp-endpoint "127.0.0.1:$otlp" \
		--audit-addr "127.0.0.1:$audit" --http-addr "127.0.0.1:$api" --log-level warn >"$work/ingest.log" 2>&1 &
	kpid=$!
	pids+=("$kpid")
	until curl -sf "http://127.0.0.1:$api/healthz" >/dev/null; do sleep 0.2; done
	j0=$(cpu "$jpid")
	load "$kpid" "$audit" "$api" ingest
	sleep 2 # Jaeger writes what it received
	jcores=$(awk -v a="$j0" -v b="$(cpu "$jpid")" -v w="$wall" 'BEGIN {printf "%.3f", (b - a) / w}')
	rss=$(hwm "$kpid")
	jrss=$(hwm "$jpid")
	kill -TERM "$kpid"
	wait "$kpid" || true
	kill -TERM "$jpid"
	wait "$jpid" || true
	bytes=$(du -sb "$work/badger" | awk '{print $1}')
	rows+=("| ingest replica (\`--role ingest\`, jaeger backend) | $cores | **$(per1k "$cores")** | $rss MiB | |")
	rows+=("| Jaeger v2 on Badger, taking the ingest replica's spans | $jcores | **$(per1k "$jcores")** | $jrss MiB | $(awk -v b="$bytes" -v e="$events" 'BEGIN {printf "%.0f", b / e}') B (Badger's folders) |")
else
	echo "no Jaeger binary at $jaeger: the Jaeger rows are left out" >&2
fi

# 3. A linker worker over NATS.
go build -o "$work/linkerworker" ./examples/linkerworker
go build -o "$work/nats-server" github.com/nats-io/nats-server/v2
nport=$(port)
"$work/nats-server" -a 127.0.0.1 -p "$nport" >"$work/nats.log" 2>&1 &
npid=$!
pids+=("$npid")
until (echo >"/dev/tcp/127.0.0.1/$nport") 2>/dev/null; do sleep 0.2; done
wm=$(port)
"$work/linkerworker" --nats-url "nats://127.0.0.1:$nport" --metrics-addr "127.0.0.1:$wm" --log-level warn >"$work/worker.log" 2>&1 &
wpid=$!
pids+=("$wpid")
until curl -sf "http://127.0.0.1:$wm/metrics" >/dev/null; do sleep 0.2; done
audit=$(port) api=$(port)
"$work/kelemetry" --data-dir "$work/data-linker" --remote-linker volumes --remote-linker-nats-url "nats://127.0.0.1:$nport" \
	--audit-addr "127.0.0.1:$audit" --http-addr "127.0.0.1:$api" --log-level warn >"$work/allinone-linker.log" 2>&1 &
kpid=$!
pids+=("$kpid")
until curl -sf "http://127.0.0.1:$api/healthz" >/dev/null; do sleep 0.2; done
w0=$(cpu "$wpid")
n0=$(cpu "$npid")
load "$kpid" "$audit" "$api" linker
wcores=$(awk -v a="$w0" -v b="$(cpu "$wpid")" -v w="$wall" 'BEGIN {printf "%.3f", (b - a) / w}')
ncores=$(awk -v a="$n0" -v b="$(cpu "$npid")" -v w="$wall" 'BEGIN {printf "%.3f", (b - a) / w}')
rows+=("| all-in-one with a remote linker (\`--remote-linker volumes\`) | $cores | **$(per1k "$cores")** | $(hwm "$kpid") MiB | |")
curl -sf "http://127.0.0.1:$wm/metrics" >"$work/worker.metrics"
jobs=$(awk '$1 ~ /^kelemetry_remotelinker_worker_jobs_total/ {s += $NF} END {printf "%.0f", s}' "$work/worker.metrics")
rows+=("| linker worker (examples/linkerworker, VolumesLinker: $jobs link jobs) | $wcores | **$(per1k "$wcores")** | $(hwm "$wpid") MiB | |")
rows+=("| nats-server carrying the link jobs | $ncores | **$(per1k "$ncores")** | $(hwm "$npid") MiB | |")

echo
echo "Measured $(date -u "+%Y-%m-%d %H:%M UTC") on $(nproc) cores (scripts/sizing.sh -r $rate -d $duration: $rate distinct events/s for $duration, batches of 400)"
echo
echo "| process | cores at $rate events/s | cores per 1,000 events/s | peak RSS | on disk per event |"
echo "| --- | --- | --- | --- | --- |"
printf '%s\n' "${rows[@]}"

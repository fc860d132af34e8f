#!/usr/bin/env bash
# Scale-out: many clusters through several ingest replicas on a NATS JetStream cluster, as
# docs/operations/scaling.md deploys them. It builds the all-in-one, examples/auditload and
# nats-server (from the Go module cache: the version go.mod pins), starts a 3-node NATS cluster
# (JetStream, the audit stream and its consumers replicated 3 times, 16 partitions) and R ingest
# replicas (--role ingest, the NATS queue, the memory store: what is measured is the ingest), and
# posts N distinct copies of the bulk fixture as C simulated clusters (auditload --distinct
# --clusters C), the batches in turn to every replica (kube-apiservers behind a Service). Then, per
# replica: the partitions it holds, the events it took in at its webhook and consumed from NATS,
# its CPU time, and the whole set's distinct events per CPU-second; it does the same with one
# replica for comparison. Everything listens on 127.0.0.1 and stops at the end.
#
# -p RATE posts at RATE events per second in all (auditload --rate) rather than as fast as the
# replicas take them: on a machine with fewer cores than the replicas and NATS servers need, the
# unpaced run measures them competing for the cores; paced below what the machine can do, each
# replica's CPU per event compares with one replica's at the same rate.
#
# Usage: scripts/scale.sh [-c CLUSTERS] [-n COPIES] [-r REPLICAS] [-p RATE]   (defaults 100, 6, 3, unpaced)
set -euo pipefail
cd "$(dirname "$0")/.."
clusters=100 copies=6 replicas=3 rate=""
while getopts "c:n:r:p:h" opt; do
	case $opt in
	c) clusters=$OPTARG ;;
	n) copies=$OPTARG ;;
	r) replicas=$OPTARG ;;
	p) rate=$OPTARG ;;
	*) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
	esac
done
work=$(mktemp -d -t kelemetry-scale.XXXXXX)
pids=()
stopall() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=()
}
trap 'stopall; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# metric FILE NAME: the sum of a Prometheus metric family's samples.
metric() { awk -v name="$2" '$1 == name || index($1, name "{") == 1 {s += $NF} END {printf "%.0f\n", s}' "$1"; }
cpu() { awk '{printf "%.2f\n", ($14 + $15) / 100}' "/proc/$1/stat"; }

go build -o "$work/kelemetry" ./cmd/kelemetry
go build -o "$work/auditload" ./examples/auditload
go build -o "$work/nats-server" github.com/nats-io/nats-server/v2

# run R: a fresh NATS cluster and R replicas, loaded; prints one block.
run() {
	local r=$1 i
	local nports=() cports=() mports=()
	for i in 0 1 2; do nports+=("$(port)"); cports+=("$(port)"); mports+=("$(port)"); done
	local routes urls=""
	routes=$(printf 'nats-route://127.0.0.1:%s,' "${cports[@]}" | sed 's/,$//')
	for i in 0 1 2; do
		mkdir -p "$work/nats-$r-$i"
		cat >"$work/nats-$r-$i.conf" <<-EOF
			server_name: n$i
			listen: 127.0.0.1:${nports[$i]}
			http: 127.0.0.1:${mports[$i]}
			jetstream {store_dir: "$work/nats-$r-$i", max_memory_store: 268435456, max_file_store: 8589934592}
			cluster {name: kelemetry, listen: 127.0.0.1:${cports[$i]}, routes: [$routes]}
		EOF
		"$work/nats-server" -c "$work/nats-$r-$i.conf" >"$work/nats-$r-$i.log" 2>&1 &
		pids+=($!)
		urls+="nats://127.0.0.1:${nports[$i]},"
	done
	urls=${urls%,}
	local natspids=("${pids[@]}")
	cat >"$work/ingest-$r.yaml" <<-EOF
		audit:
		  queue:
		    nats:
		      urls: [${urls//,/, }]
		      replicas: 3
		      partitions: 16
	EOF
	local audits=() apis=() kpids=() targets=""
	for i in $(seq 0 $((r - 1))); do
		audits+=("$(port)")
		apis+=("$(port)")
	done
	# JetStream needs its meta leader before the stream can be made.
	for i in 0 1 2; do
		for _ in $(seq 300); do
			curl -sf "http://127.0.0.1:${mports[$i]}/healthz" >/dev/null && break
			sleep 0.2
		done
	done
	for i in $(seq 0 $((r - 1))); do
		"$work/kelemetry" --config "$work/ingest-$r.yaml" --role ingest --data-dir "" --log-level warn \
			--audit-addr "127.0.0.1:${audits[$i]}" --http-addr "127.0.0.1:${apis[$i]}" >"$work/kelemetry-$r-$i.log" 2>&1 &
		kpids+=($!)
		pids+=($!)
		targets+="http://127.0.0.1:${audits[$i]}/audit/sim,"
		# One at a time: the first makes the stream.
		for _ in $(seq 300); do
			curl -sf "http://127.0.0.1:${apis[$i]}/healthz" >/dev/null && break
			kill -0 "${kpids[$i]}" 2>/dev/null || { echo "scale: replica $i exited:" >&2; cat "$work/kelemetry-$r-$i.log" >&2; exit 1; }
			sleep 0.2
		done
	done
	sleep 3 # the replicas share out the partitions
	local cpu0=() ncpu0=0 p
	for i in $(seq 0 $((r - 1))); do cpu0+=("$(cpu "${kpids[$i]}")"); done
	for p in "${natspids[@]}"; do ncpu0=$(awk -v a="$ncpu0" -v b="$(cpu "$p")" 'BEGIN {print a + b}'); done
	local pace=()
	[ -n "$rate" ] && pace=(--rate "$rate")
	"$work/auditload" --url "${targets%,}" --clusters "$clusters" --distinct --repeat "$copies" --workers 6 "${pace[@]}" \
		testdata/bulk/webhook-batches.jsonl.gz >"$work/load-$r.txt"
	local accepted
	accepted=$(grep -m1 "events accepted" "$work/load-$r.txt" | awk '{print $3}')
	# Wait until the replicas consumed every event (3 minutes at most).
	local consumed=0
	for _ in $(seq 900); do
		consumed=0
		for i in $(seq 0 $((r - 1))); do
			curl -sf "http://127.0.0.1:${apis[$i]}/metrics" >"$work/m-$r-$i.txt"
			consumed=$((consumed + $(metric "$work/m-$r-$i.txt" kelemetry_audit_consumer_events_total)))
		done
		[ "$consumed" -ge "$accepted" ] && break
		sleep 0.2
	done
	sleep 1
	local total=0 line
	echo
	echo "$r ingest replica(s), $clusters clusters, $accepted distinct events accepted, $consumed consumed:"
	echo
	echo "| replica | partitions held | events at its webhook | events consumed | CPU-seconds | events consumed per CPU-second |"
	echo "| --- | --- | --- | --- | --- | --- |"
	for i in $(seq 0 $((r - 1))); do
		curl -sf "http://127.0.0.1:${apis[$i]}/metrics" >"$work/m-$r-$i.txt"
		local c held hooked took
		c=$(awk -v a="$(cpu "${kpids[$i]}")" -v b="${cpu0[$i]}" 'BEGIN {printf "%.2f", a - b}')
		total=$(awk -v a="$total" -v b="$c" 'BEGIN {print a + b}')
		held=$(metric "$work/m-$r-$i.txt" kelemetry_natsqueue_partitions_held)
		hooked=$(metric "$work/m-$r-$i.txt" kelemetry_audit_webhook_events_total)
		took=$(metric "$work/m-$r-$i.txt" kelemetry_audit_consumer_events_total)
		line="| $i | $held | $hooked | $took | $c | $(awk -v e="$took" -v c="$c" 'BEGIN {printf "%.0f", (c > 0 ? e / c : 0)}') |"
		echo "$line"
	done
	local ncpu=0
	for p in "${natspids[@]}"; do ncpu=$(awk -v a="$ncpu" -v b="$(cpu "$p")" 'BEGIN {print a + b}'); done
	echo
	echo "All replicas: $(awk -v e="$accepted" -v c="$total" 'BEGIN {printf "%.0f", e / c}') distinct events per CPU-second ($total CPU-seconds); the 3 NATS servers: $(awk -v a="$ncpu" -v b="$ncpu0" 'BEGIN {printf "%.2f", a - b}') CPU-seconds; $(grep -m1 "wall time" "$work/load-$r.txt")"
	stopall
}

echo "scripts/scale.sh: $(date -u "+%Y-%m-%d %H:%M UTC"), $(nproc) cores; $copies distinct copies of the bulk fixture as $clusters clusters${rate:+, paced at $rate events/s}; NATS JetStream, 3 nodes, R3, 16 partitions"
run "$replicas"
run 1

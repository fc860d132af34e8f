//go:build e2e

package natse2e

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/internal/natstest"
)

// setup starts the 3-node cluster, Jaeger and n replicas, and returns the expected diffs of
// the recorded batches.
func setup(t *testing.T, n int) (nodes []*natstest.Node, j jaegerProc, bin, cfg string, rs []*replica, batches [][]byte, want map[string][]string) {
	t.Helper()
	j = startJaeger(t)
	bin = buildAllInOne(t)
	nodes = natstest.Cluster(t, 3)
	cfg = replicaConfig(t, nodes, j)
	for i := range n {
		rs = append(rs, startReplica(t, bin, cfg, string(rune('a'+i))))
	}
	batches = readBatches(t)
	want = expected(t, batches)
	return
}

// TestNATSNodeLossDuringIngest stops one of the three NATS nodes while the replicas ingest:
// nothing is lost, nothing doubled, and the diffs are those of one replica handling everything.
func TestNATSNodeLossDuringIngest(t *testing.T) {
	nodes, j, _, _, rs, batches, want := setup(t, 2)
	p := newPoster(rs...)
	half := len(batches) / 2
	p.post(t, batches[:half])
	nodes[2].Stop()
	start := time.Now()
	p.post(t, batches[half:])
	t.Logf("posted the second half with a node down in %s (%d retries)", time.Since(start), p.retries)
	waitIdle(t, nodes[:2], rs...)
	got := readSettled(t, j, want)
	logQueueMetrics(t, rs...)
	check(t, want, got)
}

// TestReplicaKill9Takeover kills the replica holding some partitions with SIGKILL in the
// middle of the ingest: the other takes them over, the diffs stay continuous and no span is
// stored twice.
func TestReplicaKill9Takeover(t *testing.T) {
	nodes, j, _, _, rs, batches, want := setup(t, 3)
	p := newPoster(rs...)
	third := len(batches) / 3
	p.post(t, batches[:third])
	rs[0].kill9(t)
	p.set(rs[1:]...)
	start := time.Now()
	p.post(t, batches[third:])
	t.Logf("posted the rest after the kill in %s", time.Since(start))
	waitIdle(t, nodes, rs[1:]...)
	t.Logf("stream drained %s after the kill", time.Since(start))
	got := readSettled(t, j, want)
	// Where the lost events come from: before the kill (handled, maybe by the killed replica)
	// or after it.
	lostBefore, lostAfter := 0, 0
	for i, b := range batches {
		evs, err := auditv1.DecodeEventList(bytes.Clone(b))
		require.NoError(t, err)
		for _, ev := range evs {
			if _, ok := want[ev.AuditID]; !ok {
				continue
			}
			if _, ok := got.diffs[ev.AuditID]; !ok {
				if i < third {
					lostBefore++
				} else {
					lostAfter++
				}
			}
		}
	}
	t.Logf("missing events posted before the kill: %d, after: %d", lostBefore, lostAfter)
	logQueueMetrics(t, rs[1:]...)
	check(t, want, got)
}

// TestRestartEverything stops the replicas while messages are still queued, restarts the three
// NATS nodes and then new replicas: consumption resumes from the acknowledged position, nothing
// lost or doubled, diffs continuous.
func TestRestartEverything(t *testing.T) {
	nodes, j, bin, cfg, rs, batches, want := setup(t, 2)
	p := newPoster(rs...)
	half := len(batches) / 2
	p.post(t, batches[:half])
	for _, r := range rs {
		r.stop(t)
	}
	t.Logf("replicas stopped; stream empty: %v", streamEmpty(t, nodes))
	for _, n := range nodes {
		n.Stop()
	}
	for _, n := range nodes {
		n.Start()
	}
	natstest.WaitJetStream(t, nodes)
	waitStreams(t, nodes)
	rs = []*replica{startReplica(t, bin, cfg, "a2"), startReplica(t, bin, cfg, "b2")}
	p.set(rs...)
	p.post(t, batches[half:])
	waitIdle(t, nodes, rs...)
	got := readSettled(t, j, want)
	require.NotEmpty(t, got.diffs)
	check(t, want, got)
}

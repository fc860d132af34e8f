package kafka

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/audit/queue"
	"github.com/kelemetry/kelemetry/telemetry"
)

// recordingQueue keeps the audit IDs it took per cluster, in order; while full is set it refuses.
type recordingQueue struct {
	mu   sync.Mutex
	got  map[string][]string
	full bool
	// maxBatch, when set, is the queue's whole capacity: a larger batch is refused as such.
	maxBatch int
}

func (q *recordingQueue) Enqueue(_ context.Context, cluster string, events []*auditv1.Event) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.full {
		return queue.ErrFull
	}
	if q.maxBatch > 0 && len(events) > q.maxBatch {
		return fmt.Errorf("%w: %w", queue.ErrFull, queue.ErrBatchTooLarge)
	}
	if q.got == nil {
		q.got = map[string][]string{}
	}
	for _, e := range events {
		q.got[cluster] = append(q.got[cluster], e.AuditID)
	}
	return nil
}
func (q *recordingQueue) EnqueueWait(ctx context.Context, c string, evs []*auditv1.Event) error {
	return q.Enqueue(ctx, c, evs)
}
func (q *recordingQueue) Flush(context.Context) error { return nil }
func (q *recordingQueue) Len() int                    { return 0 }
func (q *recordingQueue) Bytes() int64                { return 0 }

func (q *recordingQueue) ids(cluster string) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.got[cluster])
}

func (q *recordingQueue) setFull(v bool) { q.mu.Lock(); q.full = v; q.mu.Unlock() }

// rolloutEvents are the recorded rollout's audit log lines.
func rolloutEvents(t *testing.T) [][]byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "rollout", "audit.jsonl"))
	require.NoError(t, err)
	var out [][]byte
	for line := range bytes.Lines(data) {
		if line = bytes.TrimSpace(line); len(line) > 0 {
			out = append(out, bytes.Clone(line))
		}
	}
	return out
}

func auditID(t *testing.T, line []byte) string {
	t.Helper()
	ev, err := auditv1.DecodeEvent(line)
	require.NoError(t, err)
	return ev.AuditID
}

func produce(t *testing.T, brokers []string, topic string, values [][]byte, opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic)}, opts...)...)
	require.NoError(t, err)
	defer cl.Close()
	for _, v := range values {
		// One partition key for all: the topic's order is the log's.
		require.NoError(t, cl.ProduceSync(t.Context(), &kgo.Record{Key: []byte("k"), Value: v}).FirstErr())
	}
}

func start(t *testing.T, cfg Config, q queue.Target) *Source {
	t.Helper()
	if cfg.Cluster == "" {
		cfg.Cluster = "demo"
	}
	s, err := New(cfg, q, -1, telemetry.Settings{})
	require.NoError(t, err)
	require.NoError(t, s.Start(t.Context()))
	return s
}

func stop(t *testing.T, s *Source) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, s.Stop(ctx))
}

// The rollout's audit log through a Kafka topic (kfake: the Kafka protocol, in process) arrives
// whole and in order; after a restart of the consumer, nothing committed is read again and what
// was produced meanwhile is read.
func TestConsumeInOrderAndResume(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "audit"))
	require.NoError(t, err)
	defer c.Close()
	lines := rolloutEvents(t)
	half := len(lines) / 2
	produce(t, c.ListenAddrs(), "audit", lines[:half])

	q := &recordingQueue{}
	s := start(t, Config{Brokers: c.ListenAddrs(), Topics: []string{"audit"}}, q)
	var want []string
	for _, l := range lines[:half] {
		want = append(want, auditID(t, l))
	}
	require.Eventually(t, func() bool { return len(q.ids("demo")) == len(want) }, 20*time.Second, 20*time.Millisecond)
	assert.Equal(t, want, q.ids("demo"), "the topic's order")
	stop(t, s)

	produce(t, c.ListenAddrs(), "audit", lines[half:])
	q2 := &recordingQueue{}
	s = start(t, Config{Brokers: c.ListenAddrs(), Topics: []string{"audit"}}, q2)
	defer stop(t, s)
	var rest []string
	for _, l := range lines[half:] {
		rest = append(rest, auditID(t, l))
	}
	require.Eventually(t, func() bool { return len(q2.ids("demo")) >= len(rest) }, 20*time.Second, 20*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, rest, q2.ids("demo"), "only what was not committed before")
}

// While the queue refuses (full), nothing is committed: a consumer that stops then and starts
// again gets every record.
func TestFullQueueCommitsNothing(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "audit"))
	require.NoError(t, err)
	defer c.Close()
	lines := rolloutEvents(t)[:20]
	produce(t, c.ListenAddrs(), "audit", lines)

	q := &recordingQueue{full: true}
	s := start(t, Config{Brokers: c.ListenAddrs(), Topics: []string{"audit"}, Group: "g"}, q)
	time.Sleep(time.Second) // polling, refused, retrying
	stop(t, s)
	assert.Empty(t, q.ids("demo"))

	q.setFull(false)
	s = start(t, Config{Brokers: c.ListenAddrs(), Topics: []string{"audit"}, Group: "g"}, q)
	defer stop(t, s)
	require.Eventually(t, func() bool { return len(q.ids("demo")) == len(lines) }, 20*time.Second, 20*time.Millisecond)
}

// A poll holding more events than the whole queue is queued in parts, in order, not retried for
// ever.
func TestPollLargerThanTheQueue(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "audit"))
	require.NoError(t, err)
	defer c.Close()
	lines := rolloutEvents(t)
	produce(t, c.ListenAddrs(), "audit", lines)
	q := &recordingQueue{maxBatch: 3}
	s := start(t, Config{Brokers: c.ListenAddrs(), Topics: []string{"audit"}}, q)
	defer stop(t, s)
	var want []string
	for _, l := range lines {
		want = append(want, auditID(t, l))
	}
	require.Eventually(t, func() bool { return len(q.ids("demo")) == len(want) }, 20*time.Second, 20*time.Millisecond)
	assert.Equal(t, want, q.ids("demo"))
}

// Over SASL PLAIN, with records of several formats, a header naming the cluster, and a bad
// record that is skipped and committed without holding up the others.
func TestSASLFormatsAndBadRecords(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "cloud"), kfake.EnableSASL(), kfake.Superuser("PLAIN", "kelemetry", "s3cret"))
	require.NoError(t, err)
	defer c.Close()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "cloudlog", "testdata", name))
		require.NoError(t, err)
		return bytes.TrimSpace(b)
	}
	auth := kgo.SASL(plain.Auth{User: "kelemetry", Pass: "s3cret"}.AsMechanism())
	produce(t, c.ListenAddrs(), "cloud", [][]byte{read("eks-cloudwatch-subscription.json"), []byte("not json"), read("gke-pod-create.json"), read("eks-control-message.json")}, auth)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), auth)
	require.NoError(t, err)
	require.NoError(t, cl.ProduceSync(t.Context(), &kgo.Record{Topic: "cloud", Key: []byte("k"), Value: read("eks-message.json"),
		Headers: []kgo.RecordHeader{{Key: "k8s.cluster.name", Value: []byte("from-header")}}}).FirstErr())
	cl.Close()

	pw := filepath.Join(t.TempDir(), "pw")
	require.NoError(t, os.WriteFile(pw, []byte("s3cret\n"), 0o600))
	q := &recordingQueue{}
	s := start(t, Config{Brokers: c.ListenAddrs(), Topics: []string{"cloud"}, SASL: SASLConfig{Mechanism: "PLAIN", Username: "kelemetry", PasswordFile: pw}}, q)
	defer stop(t, s)
	require.Eventually(t, func() bool { return len(q.ids("from-header")) == 1 }, 20*time.Second, 20*time.Millisecond)
	assert.Equal(t, []string{"8b18663a-fddf-4f65-8369-1048b9c35b1a", "0db67492-73ff-4665-b8f9-4f05105d5aa2"}, q.ids("prod-1"))
	assert.Equal(t, []string{"8f2c1d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f"}, q.ids("gke-prod-1"))
	assert.Equal(t, []string{"c401f292-94bc-48e0-9728-6a2159c079bd"}, q.ids("from-header"))
	assert.Equal(t, int64(1), s.records.Value(recordRejected))
	assert.Equal(t, int64(1), s.records.Value(recordSkipped))
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		c   Config
		msg string
	}{
		{Config{Brokers: []string{"b:9092"}}, "no topics"},
		{Config{Topics: []string{"t"}}, "topics without brokers"},
		{Config{Brokers: []string{"b:9092"}, Topics: []string{"t"}, StartAt: "middle"}, "startAt"},
		{Config{Brokers: []string{"b:9092"}, Topics: []string{"t"}, SASL: SASLConfig{Mechanism: "GSSAPI"}}, "mechanism"},
		{Config{Brokers: []string{"b:9092"}, Topics: []string{"t"}, SASL: SASLConfig{Mechanism: "PLAIN"}}, "passwordFile"},
		{Config{Brokers: []string{"b:9092"}, Topics: []string{"t"}, Format: "splunk"}, "kafka.format"},
	} {
		err := tc.c.Validate()
		require.Error(t, err, fmt.Sprint(tc.c))
		assert.Contains(t, err.Error(), tc.msg)
	}
	assert.NoError(t, Config{}.Validate(), "off")
}

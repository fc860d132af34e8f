package kelemetry_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kelemetry/kelemetry"
)

// The recorded rollout's audit log through a Kafka topic (kfake: the Kafka protocol, in process),
// one record per event, gives the same tree as through the webhook.
func TestKafkaEqualsWebhook(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "audit"))
	require.NoError(t, err)
	defer c.Close()
	data, err := os.ReadFile(filepath.Join("testdata", "rollout", "audit.jsonl"))
	require.NoError(t, err)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("audit"))
	require.NoError(t, err)
	n := 0
	for line := range bytes.Lines(data) {
		if line = bytes.TrimSpace(line); len(line) == 0 {
			continue
		}
		// Keyed by object. The topic has one partition, as docs/install/managed-clusters.md
		// advises: the order of one partition is kept, none across partitions, and a create
		// through generateName names no object to key by.
		var ev struct {
			ObjectRef struct{ Resource, Namespace, Name string } `json:"objectRef"`
		}
		require.NoError(t, json.Unmarshal(line, &ev))
		key := ev.ObjectRef.Resource + "/" + ev.ObjectRef.Namespace + "/" + ev.ObjectRef.Name
		require.NoError(t, cl.ProduceSync(t.Context(), &kgo.Record{Key: []byte(key), Value: bytes.Clone(line)}).FirstErr())
		n++
	}
	cl.Close()
	require.Positive(t, n)

	viaWebhook := startInMemory(t, func(*kelemetry.Config) {})
	postRollout(t, viaWebhook.AuditAddr())
	waitCaughtUp(t, viaWebhook.APIAddr())
	want := fullTree(t, viaWebhook.APIAddr())

	viaKafka := startInMemory(t, func(c2 *kelemetry.Config) {
		c2.Audit.Kafka.Brokers = c.ListenAddrs()
		c2.Audit.Kafka.Topics = []string{"audit"}
	})
	require.Eventually(t, func() bool {
		waitCaughtUp(t, viaKafka.APIAddr())
		return demoTraceFound(t, viaKafka.APIAddr()) && fullTree(t, viaKafka.APIAddr()) == want
	}, 30e9, 200e6, "the Kafka path's tree equals the webhook's")
	assert.Equal(t, want, fullTree(t, viaKafka.APIAddr()))
}

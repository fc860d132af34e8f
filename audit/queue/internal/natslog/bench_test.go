package natslog

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/internal/natstest"
	"github.com/kelemetry/kelemetry/telemetry"
)

// BenchmarkPublishConsume measures publish (batches of 100, waiting for every ack) plus
// consumption (16 partitions, handler records the publish-to-handled latency) on a single
// embedded server on loopback. Reported: msgs/s end to end and p50/p99 latency. "saturated"
// publishes as fast as acks come back (the latency is then mostly backlog); "paced" publishes a
// batch of 10 every 5ms (2,000 msgs/s), below the consumer's capacity.
func BenchmarkPublishConsume(b *testing.B) {
	b.Run("saturated", func(b *testing.B) { benchPublishConsume(b, 100, 0) })
	b.Run("paced", func(b *testing.B) { benchPublishConsume(b, 10, 5*time.Millisecond) })
}

func benchPublishConsume(b *testing.B, batchSize int, pace time.Duration) {
	n := natstest.StartJetStream(b)
	cfg := testConfig(n.URL())
	cfg.Partitions = 16
	cfg.MaxInFlight = 256
	ctx := context.Background()
	p, err := NewProducer(ctx, cfg, telemetry.Settings{})
	require.NoError(b, err)
	defer p.Close()

	var (
		mu   sync.Mutex
		lats []time.Duration
		done atomic.Int64
		all  = make(chan struct{}) // closed when b.N messages were handled
	)
	c, err := NewConsumer(ctx, cfg, func(_ context.Context, d Delivery) error {
		sent, _ := strconv.ParseInt(string(d.Payload[:19]), 10, 64)
		lat := time.Since(time.Unix(0, sent))
		mu.Lock()
		lats = append(lats, lat)
		mu.Unlock()
		if done.Add(1) == int64(b.N) {
			close(all)
		}
		return nil
	}, telemetry.Settings{})
	require.NoError(b, err)
	require.NoError(b, c.Start(ctx))
	defer func() { _ = c.Stop(ctx) }()

	body := make([]byte, 1024) // about one audit event
	b.ResetTimer()
	start := time.Now()
	msgs := make([]Message, 0, batchSize)
	for i := 0; i < b.N; i += batchSize {
		msgs = msgs[:0]
		for j := i; j < min(i+batchSize, b.N); j++ {
			pl := make([]byte, 0, 19+len(body))
			pl = fmt.Appendf(pl, "%019d", time.Now().UnixNano())
			pl = append(pl, body...)
			msgs = append(msgs, Message{Cluster: "c1", Key: "ns/obj" + strconv.Itoa(j%1000), Payload: pl})
		}
		require.NoError(b, p.Publish(ctx, msgs))
		if pace > 0 {
			time.Sleep(pace) // the publish rate under test (not a wait)
		}
	}
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		b.Fatalf("%d of %d messages handled after 5 minutes", done.Load(), b.N)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	mu.Lock()
	slices.Sort(lats)
	if len(lats) > 0 {
		b.ReportMetric(float64(lats[len(lats)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lats[len(lats)*99/100].Microseconds())/1000, "p99-ms")
	}
	mu.Unlock()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
}

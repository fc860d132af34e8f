package natstest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// A restarted node answers on the same URL with the messages its store held.
func TestRestartKeepsPortAndStore(t *testing.T) {
	n := StartJetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	connect := func() jetstream.JetStream {
		nc, err := nats.Connect(n.URL())
		require.NoError(t, err)
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		return js
	}
	js := connect()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	require.NoError(t, err)
	_, err = js.Publish(ctx, "s.1", []byte("kept"))
	require.NoError(t, err)

	n.Stop()
	_, err = nats.Connect(n.URL(), nats.Timeout(200*time.Millisecond))
	require.Error(t, err, "a stopped node refuses connections")
	n.Start()

	js = connect()
	stream, err := js.Stream(ctx, "S")
	require.NoError(t, err)
	msg, err := stream.GetLastMsgForSubject(ctx, "s.1")
	require.NoError(t, err)
	require.Equal(t, "kept", string(msg.Data))
}

// A cluster elects a meta leader and replicates an R3 stream; it survives the loss of one node.
func TestClusterR3(t *testing.T) {
	nodes := Cluster(t, 3)
	require.Len(t, URLs(nodes), 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nc, err := nats.Connect(nodes[0].URL() + "," + nodes[1].URL())
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "R", Subjects: []string{"r.>"}, Replicas: 3})
	require.NoError(t, err)
	require.Equal(t, 3, s.CachedInfo().Config.Replicas)

	nodes[2].Stop()
	require.Eventually(t, func() bool {
		// Each attempt waits 2 s at most: a publish that reaches no stream leader during the
		// election gets no acknowledgement, and waiting for it until ctx ends would outlast the
		// retries.
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := js.Publish(pctx, "r.1", []byte("x"))
		return err == nil
	}, 30*time.Second, 200*time.Millisecond, "two of three nodes keep the stream writable")
}

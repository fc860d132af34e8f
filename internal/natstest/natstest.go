// Package natstest runs embedded nats-servers for tests: a single server, with or without
// JetStream, or a JetStream cluster on loopback. Each node keeps its ports and store across a
// Stop and a Start, so tests can kill and restart the NATS side of the system under test.
package natstest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// readyTimeout bounds how long a node may take to accept connections.
const readyTimeout = 20 * time.Second

// FreePort returns a loopback port that was free a moment ago.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Node is one embedded nats-server. It is stopped when the test ends.
type Node struct {
	tb   testing.TB
	opts server.Options

	mu  sync.Mutex
	srv *server.Server
}

// NewNode prepares a node from opts without starting it: loopback, a free client port when
// opts.Port is 0, no logging and no signal handlers.
func NewNode(tb testing.TB, opts server.Options) *Node {
	tb.Helper()
	opts.Host = "127.0.0.1"
	if opts.Port == 0 {
		opts.Port = FreePort(tb)
	}
	opts.NoLog, opts.NoSigs = true, true
	n := &Node{tb: tb, opts: opts}
	tb.Cleanup(n.Stop)
	return n
}

// Start starts the node (again) and waits until it accepts connections; a running node is left
// as it is.
func (n *Node) Start() {
	n.tb.Helper()
	require.NoError(n.tb, n.start())
}

func (n *Node) start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv != nil {
		return nil
	}
	opts := n.opts
	s, err := server.NewServer(&opts)
	if err != nil {
		return fmt.Errorf("nats-server %s: %w", opts.ServerName, err)
	}
	go s.Start()
	if !s.ReadyForConnections(readyTimeout) {
		s.Shutdown()
		return fmt.Errorf("nats-server %s not ready after %s", opts.ServerName, readyTimeout)
	}
	n.srv = s
	return nil
}

// Stop shuts the node down and waits until it has; a stopped node is left as it is.
func (n *Node) Stop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv == nil {
		return
	}
	n.srv.Shutdown()
	n.srv.WaitForShutdown()
	n.srv = nil
}

// URL is the node's client URL.
func (n *Node) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.opts.Port) }

// Name is the node's server name.
func (n *Node) Name() string { return n.opts.ServerName }

// Start starts a single server without JetStream, its options changed by edit (may be nil).
func Start(tb testing.TB, edit func(*server.Options)) *Node {
	tb.Helper()
	opts := server.Options{ServerName: "kelemetry-test"}
	if edit != nil {
		edit(&opts)
	}
	n := NewNode(tb, opts)
	n.Start()
	return n
}

// StartJetStream starts a single JetStream server with its store in a temporary folder.
func StartJetStream(tb testing.TB) *Node {
	tb.Helper()
	return Start(tb, func(o *server.Options) {
		o.JetStream = true
		o.StoreDir = filepath.Join(tb.TempDir(), "js")
	})
}

// Cluster starts a JetStream cluster of size nodes (named n0, n1, ...) routed to each other on
// loopback and waits until it has elected its JetStream meta leader. The ports are chosen free a
// moment before the nodes listen on them, so another process may take one first (a node then
// never becomes ready: with logging off, its listen error is not seen); the cluster is then
// started again on other ports, at most clusterAttempts times.
func Cluster(tb testing.TB, size int) []*Node {
	tb.Helper()
	var err error
	for range clusterAttempts {
		var nodes []*Node
		if nodes, err = startCluster(tb, size); err == nil {
			WaitJetStream(tb, nodes)
			return nodes
		}
		tb.Logf("natstest: %v; starting the cluster again on other ports", err)
	}
	require.NoError(tb, err)
	return nil
}

// clusterAttempts bounds the starts of Cluster.
const clusterAttempts = 3

// startCluster starts the nodes of a cluster on ports free now; on an error it stops those that
// started.
func startCluster(tb testing.TB, size int) ([]*Node, error) {
	routes := make([]string, size)
	ports := make([]int, size)
	for i := range ports {
		ports[i] = FreePort(tb)
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", ports[i])
	}
	dir := tb.TempDir()
	nodes := make([]*Node, size)
	for i := range nodes {
		nodes[i] = NewNode(tb, server.Options{
			ServerName: fmt.Sprintf("n%d", i),
			JetStream:  true,
			StoreDir:   filepath.Join(dir, fmt.Sprintf("n%d", i)),
			Cluster:    server.ClusterOpts{Name: "kelemetry-test", Host: "127.0.0.1", Port: ports[i]},
			Routes:     server.RoutesFromStr(strings.Join(routes, ",")),
		})
	}
	// The nodes start together, so that their routes connect at once.
	errs := make([]error, size)
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = n.start() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, n := range nodes {
			n.Stop()
		}
		return nil, err
	}
	return nodes, nil
}

// URLs are the nodes' client URLs.
func URLs(nodes []*Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.URL()
	}
	return out
}

// WaitJetStream waits until JetStream answers through the nodes (a cluster has elected its
// meta leader).
func WaitJetStream(tb testing.TB, nodes []*Node) {
	tb.Helper()
	require.Eventually(tb, func() bool {
		nc, err := nats.Connect(strings.Join(URLs(nodes), ","), nats.Timeout(time.Second))
		if err != nil {
			return false
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err = js.AccountInfo(ctx)
		return err == nil
	}, 60*time.Second, 200*time.Millisecond, "JetStream ready")
}

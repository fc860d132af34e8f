package natsqueue

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/require"
)

// testNode is an embedded nats-server with JetStream that can be stopped and started again on the
// same port and store.
type testNode struct {
	t       testing.TB
	opts    server.Options
	mu      sync.Mutex
	srv     *server.Server
	clientP int
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func newNode(t testing.TB, name, dir string, clusterPort int, routes []int) *testNode {
	t.Helper()
	n := &testNode{t: t, clientP: freePort(t)}
	n.opts = server.Options{
		ServerName: name,
		Host:       "127.0.0.1",
		Port:       n.clientP,
		JetStream:  true,
		StoreDir:   dir,
		NoLog:      true,
		NoSigs:     true,
	}
	if clusterPort > 0 {
		n.opts.Cluster = server.ClusterOpts{Name: "kelemetry-test", Host: "127.0.0.1", Port: clusterPort}
		var rs []string
		for _, r := range routes {
			rs = append(rs, fmt.Sprintf("nats-route://127.0.0.1:%d", r))
		}
		n.opts.Routes = server.RoutesFromStr(strings.Join(rs, ","))
	}
	n.start()
	t.Cleanup(n.stop)
	return n
}

func (n *testNode) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.clientP) }

func (n *testNode) start() {
	n.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	opts := n.opts
	s, err := server.NewServer(&opts)
	require.NoError(n.t, err)
	go s.Start()
	require.True(n.t, s.ReadyForConnections(10*time.Second), "server %s not ready", n.opts.ServerName)
	n.srv = s
}

func (n *testNode) stop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv == nil {
		return
	}
	n.srv.Shutdown()
	n.srv.WaitForShutdown()
	n.srv = nil
}

// singleNode starts one JetStream server.
func singleNode(t testing.TB) *testNode {
	return newNode(t, "n0", filepath.Join(t.TempDir(), "js"), 0, nil)
}

// cluster3 starts a 3-node JetStream cluster on loopback.
func cluster3(t testing.TB) []*testNode {
	t.Helper()
	ports := []int{freePort(t), freePort(t), freePort(t)}
	dir := t.TempDir()
	nodes := make([]*testNode, 3)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodes[i] = newNode(t, fmt.Sprintf("n%d", i), filepath.Join(dir, fmt.Sprintf("n%d", i)), ports[i], ports)
		}()
	}
	wg.Wait()
	return nodes
}

// testConfig is a small, fast configuration for tests.
func testConfig(urls ...string) Config {
	return Config{
		URLs:            urls,
		Partitions:      4,
		AckWait:         2 * time.Second,
		PinnedTTL:       2 * time.Second,
		RetryBackoff:    20 * time.Millisecond,
		MaxRetryBackoff: 100 * time.Millisecond,
		MaxDeliveries:   3,
		MaxInFlight:     8,
		PublishTimeout:  2 * time.Second,
		ConnectTimeout:  time.Second,
		ReconnectWait:   50 * time.Millisecond,
	}
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

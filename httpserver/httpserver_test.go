package httpserver

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStartServeStop(t *testing.T) {
	ctx := context.Background()
	s := newServer("test", "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "hi")
	}), options{}, nil)
	require.NoError(t, s.Stop(ctx), "stop before start is a no-op")
	require.NoError(t, s.Start(ctx))
	resp, err := http.Get("http://" + s.Addr())
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "hi", string(body))

	// A busy port fails start-up with a clear error.
	busy := newServer("other", s.Addr(), http.NotFoundHandler(), options{}, nil)
	err = busy.Start(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "other server: listen on "+s.Addr())

	require.NoError(t, s.Stop(ctx))
	resp, err = http.Get("http://" + s.Addr())
	if err == nil {
		resp.Body.Close()
	}
	assert.Error(t, err, "stopped")
}

// A client that trickles its body loses the connection at the read timeout; the handler sees
// the read fail instead of holding the connection (and its buffer) for minutes.
func TestReadTimeoutCutsTrickle(t *testing.T) {
	ctx := context.Background()
	readErr := make(chan error, 1)
	s := newServer("test", "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		readErr <- err
	}), options{Timeouts: Timeouts{Read: 300 * time.Millisecond}}, slog.New(slog.DiscardHandler))
	require.NoError(t, s.Start(ctx))
	t.Cleanup(func() { _ = s.Stop(ctx) })

	conn, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	defer conn.Close()
	start := time.Now()
	_, err = io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n")
	require.NoError(t, err)
	// One byte every 50ms would take 14 hours; the server cuts it off.
	var closed bool
	for time.Since(start) < 10*time.Second {
		if _, err := conn.Write([]byte("x")); err != nil {
			closed = true
			break
		}
		select {
		case err := <-readErr:
			require.Error(t, err, "the body read fails at the timeout")
			assert.Less(t, time.Since(start), 5*time.Second)
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
	require.True(t, closed, "the connection was neither cut nor the read failed within 10s")
}

func TestTimeoutsDefaults(t *testing.T) {
	assert.Equal(t, Timeouts{ReadHeader: DefaultReadHeaderTimeout, Read: defaultReadTimeout, Idle: DefaultIdleTimeout}, Timeouts{}.withDefaults())
	assert.Equal(t, 5*time.Second, Timeouts{Read: 5 * time.Second}.withDefaults().Read)
}

package httpserver

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/kelemetry/kelemetry/internal/logtest"
	"github.com/kelemetry/kelemetry/internal/telemetrytest"
)

// fakeClock is time.Now moved ahead by what a test adds.
type fakeClock struct{ ahead atomic.Int64 }

func (c *fakeClock) now() time.Time          { return time.Now().Add(time.Duration(c.ahead.Load())) }
func (c *fakeClock) advance(d time.Duration) { c.ahead.Add(int64(d)) }

// meter returns a meter provider with a manual reader.
func meter(t *testing.T) (*sdkmetric.MeterProvider, *sdkmetric.ManualReader) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return mp, reader
}

// listenerValue sums the points of the int64 metric name whose listener attribute is listener.
func listenerValue(t *testing.T, reader *sdkmetric.ManualReader, name, listener string) int64 {
	t.Helper()
	return telemetrytest.Int64(t, reader, name, "listener", listener)
}

// messages returns the records of rec whose message is msg.
func messages(rec *logtest.Recorder, msg string) []slog.Record {
	var out []slog.Record
	for _, r := range rec.Records() {
		if r.Message == msg {
			out = append(out, r)
		}
	}
	return out
}

// attr returns the value of the attribute key of r.
func attr(r slog.Record, key string) slog.Value {
	var v slog.Value
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value
			return false
		}
		return true
	})
	return v
}

// Peers that fail the TLS handshake (plain text on the TLS port, an untrusting client, a probe
// that hangs up) are counted per listener; the log gets a burst of lines and then one per
// interval, which says how many were suppressed. Before, each failure was one line.
func TestTLSHandshakeErrorsRateLimited(t *testing.T) {
	const n = 60
	ca := newTestCA(t, "ca")
	files := serverFiles(t, ca, t.TempDir())
	mp, reader := meter(t)
	var rec logtest.Recorder
	s, err := New(Config{AuditAddr: "127.0.0.1:0", AuditTLS: files}, Deps{Logger: slog.New(&rec),
		Meter: Meter{Provider: mp}, Audit: []Handler{Route("POST /audit", http.NotFoundHandler())}})
	require.NoError(t, err)
	var clock fakeClock
	s.audit.Guard().clock = clock.now
	require.NoError(t, s.Start(t.Context()))
	t.Cleanup(func() { _ = s.Stop(context.Background()) })

	fail := func(i int) {
		switch i % 3 {
		case 0: // plain HTTP to the TLS port
			c, err := net.Dial("tcp", s.AuditAddr())
			require.NoError(t, err)
			_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			_, _ = io.Copy(io.Discard, c)
			c.Close()
		case 1: // a client that does not trust the certificate
			_, err := tls.Dial("tcp", s.AuditAddr(), &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12})
			require.Error(t, err)
		default: // connect and hang up
			c, err := net.Dial("tcp", s.AuditAddr())
			require.NoError(t, err)
			c.Close()
		}
	}
	for i := range n {
		fail(i)
	}
	require.Eventually(t, func() bool {
		return listenerValue(t, reader, "kelemetry.listener.tls_handshake_errors", "audit") == n
	}, 5*time.Second, 10*time.Millisecond, "every failed handshake is counted")
	assert.Len(t, messages(&rec, "TLS handshake failed"), peerLogBurst, "a burst, then nothing within the interval")
	assert.Empty(t, messages(&rec, "http server"), "handshake errors are not logged as other server errors")

	clock.advance(time.Minute)
	fail(0)
	require.Eventually(t, func() bool { return len(messages(&rec, "TLS handshake failed")) == peerLogBurst+1 },
		5*time.Second, 10*time.Millisecond)
	last := messages(&rec, "TLS handshake failed")[peerLogBurst]
	assert.Equal(t, int64(n-peerLogBurst), attr(last, "suppressedSinceLastLog").Int64())
	assert.Equal(t, "audit", attr(last, "listener").String())
	assert.Contains(t, attr(last, "error").String(), "client sent an HTTP request to an HTTPS server")
	assert.Equal(t, int64(n+1), listenerValue(t, reader, "kelemetry.listener.tls_handshake_errors", "audit"))
}

// 401 answers are logged rate-limited per listener with the number suppressed, and all counted.
func TestUnauthenticatedLogRateLimited(t *testing.T) {
	const n = 200
	mp, reader := meter(t)
	var rec logtest.Recorder
	auth, err := newAPIAuth(APIAuthConfig{TokenFiles: []string{writeFile(t, t.TempDir(), "tokens", []byte("secret\n"))}},
		time.Minute, newRejectedCounter(mp), slog.New(&rec))
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"listener=api,reason=missing": 0, "listener=api,reason=invalid": 0},
		telemetrytest.Points(t, reader, "kelemetry.http.auth.rejected"), "each reason at 0 from the start")
	var clock fakeClock
	auth.clock = clock.now
	h := auth.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("the handler ran") }))
	get := func(token string) int {
		req := httptest.NewRequest(http.MethodGet, "/api/traces", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	for i := range n {
		require.Equal(t, http.StatusUnauthorized, get([]string{"", "wrong"}[i%2]))
	}
	const msg = "request refused: no valid credentials (401)"
	assert.Len(t, messages(&rec, msg), peerLogBurst)
	clock.advance(time.Minute)
	require.Equal(t, http.StatusUnauthorized, get(""))
	lines := messages(&rec, msg)
	require.Len(t, lines, peerLogBurst+1)
	assert.Equal(t, int64(n-peerLogBurst), attr(lines[peerLogBurst], "suppressedSinceLastLog").Int64())
	assert.Equal(t, slog.LevelWarn, lines[0].Level)
	assert.Equal(t, int64(n/2+1), rejectedCount(t, reader, "api", reasonMissing))
	assert.Equal(t, int64(n/2), rejectedCount(t, reader, "api", reasonInvalid))
}

// dialRefused reports whether the server reset a new connection at once: the client sees
// ECONNRESET, which kube-apiserver's webhook client retries.
func dialRefused(t *testing.T, addr string) bool {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return errors.Is(err, syscall.ECONNRESET) // reset while connecting
	}
	defer c.Close()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = io.WriteString(c, "POST /audit HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
	if err == nil {
		_, err = c.Read(make([]byte, 1))
	}
	return errors.Is(err, syscall.ECONNRESET)
}

// A listener keeps at most maxConnections open: one more is closed at once, counted and logged
// rate-limited; a closed connection frees its slot.
func TestConnectionLimit(t *testing.T) {
	mp, reader := meter(t)
	var rec logtest.Recorder
	s := newServer("api", "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "hi")
	}), options{MaxConnections: 2, Meter: mp}, slog.New(&rec))
	var clock fakeClock
	s.Guard().clock = clock.now
	require.NoError(t, s.Start(t.Context()))
	t.Cleanup(func() { _ = s.Stop(context.Background()) })

	// Two idle keep-alive connections hold both slots.
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", s.Addr())
		require.NoError(t, err)
		held = append(held, c)
		_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	assert.Equal(t, int64(2), s.Guard().Open())
	assert.Equal(t, int64(2), listenerValue(t, reader, "kelemetry.listener.connections", "api"))

	const n = 30
	for range n {
		require.True(t, dialRefused(t, s.Addr()), "a third connection is closed at once")
	}
	assert.Equal(t, int64(n), listenerValue(t, reader, "kelemetry.listener.refused_connections", "api"))
	const msg = "connection refused: the listener has maxConnections open"
	assert.Len(t, messages(&rec, msg), peerLogBurst)
	clock.advance(time.Minute)
	require.True(t, dialRefused(t, s.Addr()))
	lines := messages(&rec, msg)
	require.Len(t, lines, peerLogBurst+1)
	assert.Equal(t, int64(n-peerLogBurst), attr(lines[peerLogBurst], "suppressedSinceLastLog").Int64())
	assert.Equal(t, int64(2), attr(lines[0], "maxConnections").Int64())

	// A closed connection gives its slot back.
	require.NoError(t, held[0].Close())
	require.Eventually(t, func() bool { return s.Guard().Open() == 1 }, 5*time.Second, 10*time.Millisecond)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + s.Addr())
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "hi", string(body))
	held[1].Close()
	require.Eventually(t, func() bool {
		return s.Guard().Open() == 0 && listenerValue(t, reader, "kelemetry.listener.connections", "api") == 0
	}, 5*time.Second, 10*time.Millisecond)
}

// Idle keep-alive connections are closed after the idle timeout, silent ones after the header
// timeout: neither holds a slot of the limit for long.
func TestIdleAndSilentConnectionsClosed(t *testing.T) {
	s := newServer("api", "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "hi")
	}), options{Timeouts: Timeouts{Idle: 200 * time.Millisecond, ReadHeader: 200 * time.Millisecond}}, quiet)
	require.NoError(t, s.Start(t.Context()))
	t.Cleanup(func() { _ = s.Stop(context.Background()) })

	idle, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	defer idle.Close()
	_, err = io.WriteString(idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	br := bufio.NewReader(idle)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	silent, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	defer silent.Close()

	start := time.Now()
	for _, r := range []io.Reader{br, silent} {
		_, err := r.Read(make([]byte, 1))
		require.Error(t, err, "closed by the server")
	}
	assert.Less(t, time.Since(start), 3*time.Second)
	require.Eventually(t, func() bool { return s.Guard().Open() == 0 }, 5*time.Second, 10*time.Millisecond)
}

// Config: the limit defaults to DefaultMaxConnections; negative means none.
func TestMaxConnectionsDefault(t *testing.T) {
	assert.Equal(t, DefaultMaxConnections, Config{}.WithDefaults().MaxConnections)
	assert.Equal(t, int64(DefaultMaxConnections), NewGuard("x", 0, nil, quiet).max)
	g := NewGuard("x", -1, nil, quiet)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gl := g.Listener(ln)
	defer gl.Close()
	var conns []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		a, err := gl.Accept()
		require.NoError(t, err)
		conns = append(conns, a)
	}
	assert.Equal(t, int64(3), g.Open(), "no limit")
	for _, c := range conns {
		require.NoError(t, c.Close())
		_ = c.Close() // a second close gives nothing back
	}
	assert.Zero(t, g.Open())
}

// Lines of http.Server's ErrorLog other than handshake errors are rate-limited too.
func TestErrorLogOtherLinesRateLimited(t *testing.T) {
	var rec logtest.Recorder
	g := NewGuard("api", 0, nil, slog.New(&rec))
	w := g.errorLog()
	for i := range 50 {
		_, err := fmt.Fprintf(w, "http: Accept error: boom %d; retrying in 5ms\n", i)
		require.NoError(t, err)
	}
	assert.Len(t, messages(&rec, "http server"), peerLogBurst)
	assert.True(t, strings.HasPrefix(attr(messages(&rec, "http server")[0], "error").String(), "http: Accept error"))
	g.Flush()
	flushed := messages(&rec, "log lines suppressed since the last of their kind")
	require.Len(t, flushed, 1)
	assert.Equal(t, int64(50-peerLogBurst), attr(flushed[0], "serverErrors").Int64())
}

// A guard's counters are exported at 0 from the start, under its listener's name.
func TestGuardCountersStartAtZero(t *testing.T) {
	mp, reader := meter(t)
	NewGuard("storageapi", 0, mp, quiet)
	for _, name := range []string{"kelemetry.listener.refused_connections", "kelemetry.listener.tls_handshake_errors"} {
		assert.Equal(t, telemetrytest.Zeros("listener", "storageapi"), telemetrytest.Points(t, reader, name), name)
	}
}

package httpserver

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/kelemetry/kelemetry/internal/ratelog"
)

// DefaultMaxConnections is how many connections a listener keeps open at once by default.
const DefaultMaxConnections = 1024

// meterScope names the package's metrics.
const meterScope = "github.com/kelemetry/kelemetry/httpserver"

// Rate limits of the lines any peer can cause: a burst, then one line per interval, each saying
// how many were suppressed before it. At most about 25 lines per kind and listener in 10 minutes.
const (
	peerLogBurst = 5
	peerLogEvery = 30 * time.Second
)

// Guard bounds and counts the connections of one listener, and keeps what its peers can make it
// log bounded: a connection over the limit is accepted and reset at once (counted in
// kelemetry.listener.refused_connections), and failed TLS handshakes are counted in
// kelemetry.listener.tls_handshake_errors; both are logged rate-limited, each line with the
// number suppressed before it. The HTTP listeners use one each; the storage API's gRPC listener
// uses one too. Safe for concurrent use.
type Guard struct {
	name   string
	max    int64
	logger *slog.Logger
	attrs  metric.MeasurementOption

	open      atomic.Int64
	conns     metric.Int64UpDownCounter
	refused   metric.Int64Counter
	handshake metric.Int64Counter

	refuseLog, handshakeLog, serverLog ratelog.Limiter
	clock                              func() time.Time // time.Now; tests move it
}

// NewGuard returns the guard of the listener name (the listener attribute of its metrics),
// keeping at most maxConns connections open (0: DefaultMaxConnections; negative: no limit).
// mp and logger may be nil.
func NewGuard(name string, maxConns int, mp metric.MeterProvider, logger *slog.Logger) *Guard {
	if maxConns == 0 {
		maxConns = DefaultMaxConnections
	}
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	if logger == nil {
		logger = slog.Default()
	}
	g := &Guard{name: name, max: int64(maxConns), logger: logger,
		attrs:        metric.WithAttributeSet(attribute.NewSet(attribute.String("listener", name))),
		refuseLog:    ratelog.Limiter{Burst: peerLogBurst, Every: peerLogEvery},
		handshakeLog: ratelog.Limiter{Burst: peerLogBurst, Every: peerLogEvery},
		serverLog:    ratelog.Limiter{Burst: peerLogBurst, Every: peerLogEvery},
		clock:        time.Now,
	}
	m := mp.Meter(meterScope)
	var err error
	if g.conns, err = m.Int64UpDownCounter("kelemetry.listener.connections",
		metric.WithDescription("Connections open on a listener, by listener."), metric.WithUnit("{connection}")); err != nil {
		g.conns = noop.Int64UpDownCounter{}
	}
	if g.refused, err = m.Int64Counter("kelemetry.listener.refused_connections",
		metric.WithDescription("Connections closed at once because the listener had maxConnections open, by listener."), metric.WithUnit("{connection}")); err != nil {
		g.refused = noop.Int64Counter{}
	}
	if g.handshake, err = m.Int64Counter("kelemetry.listener.tls_handshake_errors",
		metric.WithDescription("TLS handshakes that failed (bad or no client certificate, plain text on a TLS port, a peer that hung up), by listener."), metric.WithUnit("{connection}")); err != nil {
		g.handshake = noop.Int64Counter{}
	}
	// The listener's counters are at 0 from the start, so that an increase() over them sees the
	// first refusal or failed handshake.
	g.refused.Add(context.Background(), 0, g.attrs)
	g.handshake.Add(context.Background(), 0, g.attrs)
	return g
}

// Open is the number of connections open now.
func (g *Guard) Open() int64 { return g.open.Load() }

// Listener returns ln bounded by the guard.
func (g *Guard) Listener(ln net.Listener) net.Listener { return &guardedListener{Listener: ln, g: g} }

// HandshakeFailed counts a failed TLS handshake of the peer remote and logs it, rate-limited.
func (g *Guard) HandshakeFailed(ctx context.Context, remote, reason string) {
	if ok, suppressed := g.handshakeLog.Allow(g.clock()); ok {
		g.logger.LogAttrs(ctx, slog.LevelWarn, "TLS handshake failed",
			slog.String("listener", g.name), slog.String("remote", remote), slog.String("error", reason),
			slog.Int("suppressedSinceLastLog", suppressed))
	}
	g.handshake.Add(ctx, 1, g.attrs)
}

// Flush logs how many lines were suppressed since the last of each kind (at stop).
func (g *Guard) Flush() {
	refused, handshake, server := g.refuseLog.TakeSuppressed(), g.handshakeLog.TakeSuppressed(), g.serverLog.TakeSuppressed()
	if refused+handshake+server > 0 {
		g.logger.Info("log lines suppressed since the last of their kind", slog.String("listener", g.name),
			slog.Int("refusedConnections", refused), slog.Int("tlsHandshakeErrors", handshake), slog.Int("serverErrors", server))
	}
}

// refuse counts and logs (rate-limited) a connection closed over the limit.
func (g *Guard) refuse(remote net.Addr) {
	ctx := context.Background()
	g.refused.Add(ctx, 1, g.attrs)
	if ok, suppressed := g.refuseLog.Allow(g.clock()); ok {
		r := ""
		if remote != nil {
			r = remote.String()
		}
		g.logger.LogAttrs(ctx, slog.LevelWarn, "connection refused: the listener has maxConnections open",
			slog.String("listener", g.name), slog.String("remote", r), slog.Int64("maxConnections", g.max),
			slog.Int("suppressedSinceLastLog", suppressed))
	}
}

// errorLog is the writer of an http.Server's ErrorLog: TLS handshake errors go to
// HandshakeFailed, other lines (a failed Accept, a panic in a handler) are logged rate-limited.
func (g *Guard) errorLog() io.Writer { return errorLogWriter{g} }

type errorLogWriter struct{ g *Guard }

// handshakePrefix starts the line net/http logs for a failed TLS handshake.
const handshakePrefix = "http: TLS handshake error from "

func (w errorLogWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	if rest, ok := strings.CutPrefix(line, handshakePrefix); ok {
		remote, reason, _ := strings.Cut(rest, ": ")
		w.g.HandshakeFailed(context.Background(), remote, reason)
		return len(p), nil
	}
	if ok, suppressed := w.g.serverLog.Allow(w.g.clock()); ok {
		w.g.logger.LogAttrs(context.Background(), slog.LevelWarn, "http server",
			slog.String("listener", w.g.name), slog.String("error", line), slog.Int("suppressedSinceLastLog", suppressed))
	}
	return len(p), nil
}

// guardedListener closes connections over the guard's limit as soon as they are accepted.
type guardedListener struct {
	net.Listener
	g *Guard
}

func (l *guardedListener) Accept() (net.Conn, error) {
	g := l.g
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if n := g.open.Add(1); g.max > 0 && n > g.max {
			g.open.Add(-1)
			// Reset rather than close: a client sees ECONNRESET, which kube-apiserver's webhook
			// client retries (it does not retry an EOF).
			g.refuse(c.RemoteAddr())
			if tc, ok := c.(interface{ SetLinger(int) error }); ok {
				_ = tc.SetLinger(0)
			}
			_ = c.Close()
			continue
		}
		g.conns.Add(context.Background(), 1, g.attrs)
		return &guardedConn{Conn: c, g: g}, nil
	}
}

// guardedConn gives its slot back when closed.
type guardedConn struct {
	net.Conn
	g      *Guard
	closed atomic.Bool
}

func (c *guardedConn) Close() error {
	err := c.Conn.Close()
	if c.closed.CompareAndSwap(false, true) {
		c.g.open.Add(-1)
		c.g.conns.Add(context.Background(), -1, c.g.attrs)
	}
	return err
}

// CloseWrite half-closes a TCP connection: net/http does so before closing a connection whose
// request body it did not read, so that the client reads the answer rather than a reset.
func (c *guardedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// ReadFrom keeps the TCP connection's sendfile path for files served whole.
func (c *guardedConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

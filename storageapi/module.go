package storageapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/fx"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/kelemetry/kelemetry/frontend"
	"github.com/kelemetry/kelemetry/httpserver"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Config configures the storage API listener.
type Config struct {
	// Addr is the listen address (HOST:PORT) of the jaeger.storage.v2 gRPC server; empty (the
	// default) serves nothing.
	Addr string `yaml:"addr"`
	// TLS serves gRPC over TLS with this certificate, reloaded when its files change (the root
	// configuration passes the API's httpTLS). Empty: plain gRPC.
	TLS httpserver.TLSConfig `yaml:"tls"`
	// TokenFiles, when set, make every call but the health checks carry one of these bearer
	// tokens as gRPC metadata "authorization: Bearer <token>" (the root configuration passes the
	// API's httpAuth.tokenFiles); others get Unauthenticated.
	TokenFiles []string `yaml:"tokenFiles"`
	// ReloadInterval is how often, at most, certificate and token files are re-read (default
	// httpserver.DefaultReloadInterval).
	ReloadInterval time.Duration `yaml:"reloadInterval"`
	// MaxConnections bounds the connections kept open at once (default
	// httpserver.DefaultMaxConnections, 1024; negative: no limit). One more is reset as soon as
	// it is accepted, counted in kelemetry.listener.refused_connections{listener="storageapi"}
	// and logged rate-limited.
	MaxConnections int `yaml:"maxConnections"`
	// IdleTimeout closes a connection that has had no call for this long (gRPC's
	// MaxConnectionIdle: a GOAWAY, after which a client reconnects for its next call; default
	// httpserver.DefaultIdleTimeout, 2m).
	IdleTimeout time.Duration `yaml:"idleTimeout"`
	// HandshakeTimeout bounds a new connection's TLS handshake and HTTP/2 preface (default
	// httpserver.DefaultReadHeaderTimeout, 10s; gRPC's own default is 120s, for which a silent
	// peer would hold a connection).
	HandshakeTimeout time.Duration `yaml:"handshakeTimeout"`
}

// Keepalive settings of the listener: the server pings a connection without traffic after
// keepaliveTime and closes it when no answer comes within keepaliveTimeout (a vanished peer frees
// its slot); clients may ping every keepaliveMinTime, even without calls (more often is answered
// with GOAWAY "too_many_pings", as gRPC's enforcement does).
const (
	keepaliveTime    = time.Minute
	keepaliveTimeout = 20 * time.Second
	keepaliveMinTime = 10 * time.Second
)

// WithDefaults returns c with zero fields set to their defaults; the zero value serves nothing.
func (c Config) WithDefaults() Config {
	if c.ReloadInterval <= 0 {
		c.ReloadInterval = httpserver.DefaultReloadInterval
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = httpserver.DefaultMaxConnections
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = httpserver.DefaultIdleTimeout
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = httpserver.DefaultReadHeaderTimeout
	}
	return c
}

// Validate reports an address that is not HOST:PORT and unusable TLS files.
func (c Config) Validate() error {
	if c.Addr == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("storageapi: addr %q: %w", c.Addr, err)
	}
	if c.TLS.Enabled() {
		if err := c.TLS.Validate(); err != nil {
			return fmt.Errorf("storageapi: tls: %w", err)
		}
	}
	if c.ReloadInterval < 0 {
		return fmt.Errorf("storageapi: reloadInterval %s is negative", c.ReloadInterval)
	}
	if c.IdleTimeout < 0 {
		return fmt.Errorf("storageapi: idleTimeout %s is negative", c.IdleTimeout)
	}
	if c.HandshakeTimeout < 0 {
		return fmt.Errorf("storageapi: handshakeTimeout %s is negative", c.HandshakeTimeout)
	}
	return nil
}

// Listener serves a Server on Config.Addr together with the standard gRPC health service
// (grpc.health.v1, SERVING while started) and server reflection. It keeps at most
// Config.MaxConnections connections, closes idle ones (IdleTimeout) and silent ones
// (HandshakeTimeout), counts failed TLS handshakes (kelemetry.listener.tls_handshake_errors) and
// logs them rate-limited (httpserver.Guard), and answers a request it cannot decode (malformed,
// nested deeper than protobuf's recursion limit) with InvalidArgument, not gRPC's Internal.
type Listener struct {
	cfg    Config
	srv    *grpc.Server
	health *health.Server
	logger *slog.Logger
	guard  *httpserver.Guard

	mu   sync.Mutex
	addr net.Addr
	done chan struct{}
}

// newListener prepares the gRPC server of s on cfg.Addr, with TLS and bearer tokens when
// configured; Start listens. It fails on unreadable certificate or token files.
func newListener(cfg Config, s *server, tel telemetry.Settings) (*Listener, error) {
	cfg = cfg.WithDefaults()
	logger := tel.Log().With("component", "storageapi")
	guard := httpserver.NewGuard("storageapi", cfg.MaxConnections, tel.Provider(), logger)
	opts := []grpc.ServerOption{
		grpc.ConnectionTimeout(cfg.HandshakeTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: cfg.IdleTimeout,
			Time: keepaliveTime, Timeout: keepaliveTimeout}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: keepaliveMinTime, PermitWithoutStream: true}),
		grpc.ForceServerCodecV2(rawCodec{}),
		grpc.ChainStreamInterceptor(decodeStream),
	}
	if cfg.TLS.Enabled() {
		tc, err := httpserver.ServerTLSConfig(cfg.TLS, cfg.ReloadInterval, logger)
		if err != nil {
			return nil, fmt.Errorf("storage API TLS: %w", err)
		}
		opts = append(opts, grpc.Creds(guardedCreds{TransportCredentials: credentials.NewTLS(tc), guard: guard}))
	}
	if len(cfg.TokenFiles) > 0 {
		tokens, err := httpserver.NewTokenChecker(cfg.TokenFiles, cfg.ReloadInterval, logger)
		if err != nil {
			return nil, fmt.Errorf("storage API tokens: %w", err)
		}
		a := &authorizer{tokens: tokens, rejected: instrument.NewMeter(tel, meterScope).Counter("kelemetry.storageapi.auth.rejected",
			"jaeger.storage.v2 calls refused (Unauthenticated) for a missing or unknown bearer token.", "{call}", *attribute.EmptySet())}
		opts = append(opts, grpc.ChainUnaryInterceptor(a.unary), grpc.ChainStreamInterceptor(a.stream))
	}
	g := grpc.NewServer(opts...)
	s.Register(inputErrors{g})
	h := health.NewServer()
	healthpb.RegisterHealthServer(inputErrors{g}, h)
	reflection.Register(g) // streams only: decodeStream covers it
	return &Listener{cfg: cfg, srv: g, health: h, logger: logger, guard: guard}, nil
}

// guardedCreds counts and logs (rate-limited) failed TLS handshakes.
type guardedCreds struct {
	credentials.TransportCredentials
	guard *httpserver.Guard
}

func (c guardedCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	out, info, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		c.guard.HandshakeFailed(context.Background(), conn.RemoteAddr().String(), err.Error())
	}
	return out, info, err
}

func (c guardedCreds) Clone() credentials.TransportCredentials {
	return guardedCreds{TransportCredentials: c.TransportCredentials.Clone(), guard: c.guard}
}

// authorizer requires a bearer token on every call but the health service's (Kubernetes gRPC
// probes send none).
type authorizer struct {
	tokens   *httpserver.TokenChecker
	rejected metric.Int64Counter
}

func (a *authorizer) check(ctx context.Context, method string) error {
	if strings.HasPrefix(method, "/"+healthpb.Health_ServiceDesc.ServiceName+"/") {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		scheme, tok, ok := strings.Cut(v, " ")
		if ok && strings.EqualFold(scheme, "Bearer") && a.tokens.Valid(strings.TrimSpace(tok)) {
			return nil
		}
	}
	a.rejected.Add(ctx, 1)
	return status.Error(codes.Unauthenticated, "a valid bearer token is required (metadata authorization: Bearer <token>)")
}

func (a *authorizer) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := a.check(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (a *authorizer) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := a.check(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return h(srv, ss)
}

// Start listens on the configured address and serves in the background.
func (l *Listener) Start(context.Context) error {
	ln, err := net.Listen("tcp", l.cfg.Addr)
	if err != nil {
		return fmt.Errorf("storage API listener: %w", err)
	}
	ln = l.guard.Listener(ln)
	l.mu.Lock()
	l.addr = ln.Addr()
	l.done = make(chan struct{})
	done := l.done
	l.mu.Unlock()
	l.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	go func() {
		defer close(done)
		if err := l.srv.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			l.logger.Error("storage API listener", "error", err)
		}
	}()
	l.logger.Info("serving jaeger.storage.v2", "addr", ln.Addr().String())
	return nil
}

// Addr is the address the listener is bound to (nil before Start).
func (l *Listener) Addr() net.Addr {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.addr
}

// Stop reports NOT_SERVING, lets running requests finish until ctx ends, then closes the
// remaining connections. It is safe without Start.
func (l *Listener) Stop(ctx context.Context) error {
	l.health.Shutdown()
	stopped := make(chan struct{})
	go func() {
		l.srv.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-ctx.Done():
		l.srv.Stop()
		<-stopped
	}
	l.mu.Lock()
	done := l.done
	l.mu.Unlock()
	if done != nil {
		<-done
	}
	l.guard.Flush()
	return nil
}

// moduleParams are the fx inputs of the module.
type moduleParams struct {
	fx.In

	Config    Config `optional:"true"`
	Engine    *frontend.Engine
	Telemetry telemetry.Settings `optional:"true"`
	Lifecycle fx.Lifecycle
}

// newModule builds the listener when Config.Addr is set; nil otherwise.
func newModule(p moduleParams) (*Listener, error) {
	if err := p.Config.Validate(); err != nil {
		return nil, err
	}
	if p.Config.Addr == "" {
		return nil, nil
	}
	l, err := newListener(p.Config, newServer(p.Engine, p.Telemetry), p.Telemetry)
	if err != nil {
		return nil, err
	}
	p.Lifecycle.Append(fx.StartStopHook(l.Start, l.Stop))
	return l, nil
}

// Module serves the frontend's engine (frontend.Module) through jaeger.storage.v2 on
// Config.Addr, with gRPC health and reflection; without an address it provides a nil
// *Listener and serves nothing. The server stops gracefully within fx's stop timeout.
var Module = fx.Module("storageapi", fx.Provide(newModule), fx.Invoke(func(*Listener) {}))

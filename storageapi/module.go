package storageapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"go.uber.org/fx"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/kelemetry/kelemetry/frontend"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Config configures the storage API listener.
type Config struct {
	// Addr is the listen address (HOST:PORT) of the jaeger.storage.v2 gRPC server; empty (the
	// default) serves nothing. Plain gRPC without authentication: keep it on a trusted network.
	Addr string `yaml:"addr"`
}

// WithDefaults returns c unchanged: the zero value (no listener) is the default.
func (c Config) WithDefaults() Config { return c }

// Validate reports an address that is not HOST:PORT.
func (c Config) Validate() error {
	if c.Addr == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("storageapi: addr %q: %w", c.Addr, err)
	}
	return nil
}

// Listener serves a Server on Config.Addr together with the standard gRPC health service
// (grpc.health.v1, SERVING while started) and server reflection.
type Listener struct {
	cfg    Config
	srv    *grpc.Server
	health *health.Server
	logger *slog.Logger

	mu   sync.Mutex
	addr net.Addr
	done chan struct{}
}

// NewListener prepares the gRPC server of s on cfg.Addr; Start listens.
func NewListener(cfg Config, s *Server, tel telemetry.Settings) *Listener {
	g := grpc.NewServer()
	s.Register(g)
	h := health.NewServer()
	healthpb.RegisterHealthServer(g, h)
	reflection.Register(g)
	return &Listener{cfg: cfg, srv: g, health: h, logger: tel.Log().With("component", "storageapi")}
}

// Start listens on the configured address and serves in the background.
func (l *Listener) Start(context.Context) error {
	ln, err := net.Listen("tcp", l.cfg.Addr)
	if err != nil {
		return fmt.Errorf("storage API listener: %w", err)
	}
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
	return nil
}

// ModuleParams are the fx inputs of the module.
type ModuleParams struct {
	fx.In

	Config    Config `optional:"true"`
	Engine    *frontend.Engine
	Telemetry telemetry.Settings `optional:"true"`
	Lifecycle fx.Lifecycle
}

// newModule builds the listener when Config.Addr is set; nil otherwise.
func newModule(p ModuleParams) (*Listener, error) {
	if err := p.Config.Validate(); err != nil {
		return nil, err
	}
	if p.Config.Addr == "" {
		return nil, nil
	}
	l := NewListener(p.Config, NewServer(p.Engine, p.Telemetry), p.Telemetry)
	p.Lifecycle.Append(fx.StartStopHook(l.Start, l.Stop))
	return l, nil
}

// Module serves the frontend's engine (frontend.Module) through jaeger.storage.v2 on
// Config.Addr, with gRPC health and reflection; without an address it provides a nil
// *Listener and serves nothing. The server stops gracefully within fx's stop timeout.
var Module = fx.Module("storageapi", fx.Provide(newModule), fx.Invoke(func(*Listener) {}))

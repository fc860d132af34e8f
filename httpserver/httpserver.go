package httpserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"
)

// server is one HTTP listener.
type server struct {
	name   string
	addr   string
	srv    *http.Server
	logger *slog.Logger
	tls    bool
	guard  *Guard

	mu    sync.Mutex
	bound string
	done  chan struct{}
}

// Timeouts bound how long a client may take. The zero value means the defaults.
type Timeouts struct {
	// ReadHeader bounds the arrival of a request's headers (default 10s).
	ReadHeader time.Duration `yaml:"readHeader"`
	// Read bounds the arrival of a whole request, body included (default 30s): a client that
	// trickles its body cannot hold a connection and its buffer for longer. At the webhook's
	// largest body (32 MiB) this asks for about 1 MiB/s, which kube-apiserver on the same network
	// far exceeds.
	Read time.Duration `yaml:"read"`
	// Idle bounds a kept-alive connection between requests (default 2m).
	Idle time.Duration `yaml:"idle"`
}

// Defaults of Timeouts.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	defaultReadTimeout       = 30 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
)

// withDefaults returns t with zero fields set to their defaults.
func (t Timeouts) withDefaults() Timeouts {
	if t.ReadHeader <= 0 {
		t.ReadHeader = DefaultReadHeaderTimeout
	}
	if t.Read <= 0 {
		t.Read = defaultReadTimeout
	}
	if t.Idle <= 0 {
		t.Idle = DefaultIdleTimeout
	}
	return t
}

// options are a Server's limits and instruments. The zero value means the defaults.
type options struct {
	// Timeouts bound slow and idle clients.
	Timeouts Timeouts
	// MaxConnections bounds the connections open at once (default DefaultMaxConnections;
	// negative: no limit): one more is reset as soon as it is accepted (see Guard).
	MaxConnections int
	// Meter counts connections, refused connections and failed TLS handshakes (nil: not
	// counted).
	Meter metric.MeterProvider
}

// newServer returns a server for handler on addr (host:port; port 0 picks a free one). What its
// peers can make it log (failed TLS handshakes, refused connections, other errors of
// http.Server) is rate-limited and counted by its Guard, named name.
func newServer(name, addr string, handler http.Handler, opts options, logger *slog.Logger) *server {
	if logger == nil {
		logger = slog.Default()
	}
	timeouts := opts.Timeouts.withDefaults()
	guard := NewGuard(name, opts.MaxConnections, opts.Meter, logger)
	return &server{
		name:   name,
		addr:   addr,
		logger: logger.With("server", name),
		guard:  guard,
		srv: &http.Server{
			Handler:           handler,
			ReadHeaderTimeout: timeouts.ReadHeader,
			ReadTimeout:       timeouts.Read,
			IdleTimeout:       timeouts.Idle,
			ErrorLog:          log.New(guard.errorLog(), "", 0),
		},
	}
}

// Guard is the server's connection guard (its limit and counts).
func (s *server) Guard() *Guard { return s.guard }

// setTLS makes the server serve TLS with cfg (which must provide a certificate, e.g. through
// GetCertificate). Call it before Start.
func (s *server) setTLS(cfg *tls.Config) {
	s.srv.TLSConfig = cfg
	s.tls = cfg != nil
}

// Start binds the address and serves in the background.
func (s *server) Start(context.Context) error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("%s server: listen on %s: %w", s.name, s.addr, err)
	}
	ln = s.guard.Listener(ln)
	s.mu.Lock()
	s.bound = ln.Addr().String()
	s.done = make(chan struct{})
	done := s.done
	s.mu.Unlock()
	s.logger.Info("listening", "addr", s.bound, "tls", s.tls)
	go func() {
		defer close(done)
		var err error
		if s.tls {
			err = s.srv.ServeTLS(ln, "", "")
		} else {
			err = s.srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("serve", "error", err)
		}
	}()
	return nil
}

// Stop shuts the server down, waiting for running requests until ctx ends.
func (s *server) Stop(ctx context.Context) error {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done == nil {
		return nil
	}
	err := s.srv.Shutdown(ctx)
	<-done
	s.guard.Flush()
	if err != nil {
		return fmt.Errorf("%s server: shutdown: %w", s.name, err)
	}
	return nil
}

// Addr is the bound address after Start (useful with port 0), else the configured one.
func (s *server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bound != "" {
		return s.bound
	}
	return s.addr
}

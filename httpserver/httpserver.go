package httpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Server is one HTTP listener.
type Server struct {
	name   string
	addr   string
	srv    *http.Server
	logger *slog.Logger

	mu    sync.Mutex
	bound string
	done  chan struct{}
}

// NewServer returns a server for handler on addr (host:port; port 0 picks a free one).
func NewServer(name, addr string, handler http.Handler, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.Default()
	}
	return &Server{
		name:   name,
		addr:   addr,
		logger: logger.With("server", name),
		srv: &http.Server{
			Handler:           handler,
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       2 * time.Minute,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		},
	}
}

// Start binds the address and serves in the background.
func (s *Server) Start(context.Context) error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("%s server: listen on %s: %w", s.name, s.addr, err)
	}
	s.mu.Lock()
	s.bound = ln.Addr().String()
	s.done = make(chan struct{})
	done := s.done
	s.mu.Unlock()
	s.logger.Info("listening", "addr", s.bound)
	go func() {
		defer close(done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("serve", "error", err)
		}
	}()
	return nil
}

// Stop shuts the server down, waiting for running requests until ctx ends.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done == nil {
		return nil
	}
	err := s.srv.Shutdown(ctx)
	<-done
	if err != nil {
		return fmt.Errorf("%s server: shutdown: %w", s.name, err)
	}
	return nil
}

// Addr is the bound address after Start (useful with port 0), else the configured one.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bound != "" {
		return s.bound
	}
	return s.addr
}

package httpserver

import (
	"crypto/tls"
	"log/slog"
	"time"
)

// ServerTLSConfig returns a tls.Config serving c's certificate (TLS 1.2 at least), re-read from
// its files at most every interval when they change, as the HTTP listeners do. Other listeners
// (such as the storage API's gRPC one) use it to share the API's TLS settings.
func ServerTLSConfig(c TLSConfig, interval time.Duration, logger *slog.Logger) (*tls.Config, error) {
	if logger == nil {
		logger = slog.Default()
	}
	return serverTLS(c, nil, interval, logger)
}

// TokenChecker accepts the bearer tokens of token files (one per line, as APIAuthConfig's),
// re-reading them at most every interval.
type TokenChecker struct{ set *tokenSet }

// NewTokenChecker reads files; with none it returns nil, which accepts nothing.
func NewTokenChecker(files []string, interval time.Duration, logger *slog.Logger) (*TokenChecker, error) {
	if logger == nil {
		logger = slog.Default()
	}
	s, err := newTokenSet(files, interval, logger)
	if err != nil || s == nil {
		return nil, err
	}
	return &TokenChecker{set: s}, nil
}

// Valid reports whether tok is one of the accepted tokens (compared in constant time).
func (c *TokenChecker) Valid(tok string) bool { return c != nil && c.set.valid(tok) }

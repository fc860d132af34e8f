package natsqueue

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"
)

// Dial opens a NATS connection with cfg's connection settings only (URLs, TLS, CredentialsFile,
// NKeySeedFile, ConnectTimeout, ReconnectWait, MaxReconnectWait, Name; the stream settings are
// not used), for other users of NATS than the queue, e.g. remote linkers. It reconnects forever
// with backoff; a publish or request while disconnected fails at once instead of being buffered.
// A nil logger means slog.Default(). The caller closes (or drains) the connection.
func Dial(cfg Config, logger *slog.Logger) (*nats.Conn, error) {
	cfg = cfg.WithDefaults()
	if len(cfg.URLs) == 0 {
		return nil, errors.New("natsqueue: dial: at least one NATS URL is required")
	}
	if logger == nil {
		logger = slog.Default()
	}
	nc, err := connect(cfg, logger)
	if err != nil {
		return nil, fmt.Errorf("natsqueue: %w", err)
	}
	return nc, nil
}

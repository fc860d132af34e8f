package otlpsink

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Protocols.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http"
)

// Defaults for Config.
const (
	DefaultQueueSize      = 10_000
	DefaultBatchSize      = 512
	DefaultFlushInterval  = 2 * time.Second
	DefaultEnqueueTimeout = time.Second
	DefaultTimeout        = 10 * time.Second
	DefaultMaxRetries     = 3
	DefaultRetryBackoff   = time.Second
	maxRetryBackoff       = 30 * time.Second
)

// Config configures the sink. The zero value means defaults: gRPC with TLS to the endpoint the
// OTEL_EXPORTER_OTLP_* environment variables name, or localhost:4317.
type Config struct {
	// Endpoint is host:port, or a URL (http:// implies no TLS). For HTTP, a URL without a path
	// gets /v1/traces.
	Endpoint string `yaml:"endpoint"`
	// Protocol is "grpc" (default) or "http" (protobuf over HTTP).
	Protocol string `yaml:"protocol"`
	// Insecure disables TLS.
	Insecure bool `yaml:"insecure"`
	// Headers are sent with every request, e.g. an authorization header.
	Headers map[string]string `yaml:"headers"`
	// Compression is "" or "none" (default) or "gzip".
	Compression string `yaml:"compression"`
	// Timeout bounds one export attempt (default 10s).
	Timeout time.Duration `yaml:"timeout"`
	// QueueSize bounds the spans waiting to be sent (default 10,000).
	QueueSize int `yaml:"queueSize"`
	// BatchSize is the largest number of spans sent in one request (default 512).
	BatchSize int `yaml:"batchSize"`
	// FlushInterval is the longest a queued span waits for its batch to fill (default 2s).
	FlushInterval time.Duration `yaml:"flushInterval"`
	// EnqueueTimeout is how long Export waits for room in a full queue before it drops the rest
	// of its spans (default 1s; negative: drop at once).
	EnqueueTimeout time.Duration `yaml:"enqueueTimeout"`
	// MaxRetries is the number of retries of a failed batch before it is dropped (default 3;
	// negative: no retry).
	MaxRetries int `yaml:"maxRetries"`
	// RetryBackoff is the wait before the first retry; it doubles for each further retry, up to
	// 30s (default 1s).
	RetryBackoff time.Duration `yaml:"retryBackoff"`
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Protocol == "" {
		c.Protocol = ProtocolGRPC
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.QueueSize == 0 {
		c.QueueSize = DefaultQueueSize
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.EnqueueTimeout == 0 {
		c.EnqueueTimeout = DefaultEnqueueTimeout
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = DefaultMaxRetries
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = DefaultRetryBackoff
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.Protocol != ProtocolGRPC && c.Protocol != ProtocolHTTP:
		return fmt.Errorf("otlpsink: protocol %q is neither %q nor %q", c.Protocol, ProtocolGRPC, ProtocolHTTP)
	case c.Compression != "" && c.Compression != "none" && c.Compression != "gzip":
		return fmt.Errorf("otlpsink: compression %q is neither none nor gzip", c.Compression)
	case c.QueueSize < 0, c.BatchSize < 0:
		return fmt.Errorf("otlpsink: queueSize and batchSize must not be negative")
	case c.Timeout < 0, c.FlushInterval < 0, c.RetryBackoff < 0:
		return fmt.Errorf("otlpsink: timeout, flushInterval and retryBackoff must not be negative")
	}
	if isURL(c.Endpoint) {
		u, err := url.Parse(c.Endpoint)
		if err != nil {
			return fmt.Errorf("otlpsink: endpoint: %w", err)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return fmt.Errorf("otlpsink: endpoint scheme %q is neither http nor https", u.Scheme)
		}
	}
	return nil
}

func isURL(endpoint string) bool { return strings.Contains(endpoint, "://") }

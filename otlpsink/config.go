package otlpsink

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Protocols, the values of Config.Protocol.
const (
	// protocolGRPC is OTLP over gRPC (port 4317 by convention).
	protocolGRPC = "grpc"
	// protocolHTTP is OTLP/HTTP with protobuf bodies (port 4318 by convention).
	protocolHTTP = "http/protobuf"
	// protocolHTTPShort is the older spelling of protocolHTTP, still accepted.
	protocolHTTPShort = "http"
)

// Defaults for Config.
const (
	defaultQueueSize      = 10_000
	defaultMaxQueueBytes  = 64 << 20
	defaultBatchSize      = 512
	defaultMaxBatchBytes  = 2 << 20
	defaultFlushInterval  = 2 * time.Second
	defaultEnqueueTimeout = time.Second
	defaultTimeout        = 10 * time.Second
	defaultRetryBackoff   = time.Second
	maxRetryBackoff       = 30 * time.Second
)

// grpcPort is gRPC's conventional OTLP port: an http(s) URL on it means gRPC unless Protocol
// says otherwise.
const grpcPort = "4317"

// Config configures the sink. The zero value means defaults: the endpoint the
// OTEL_EXPORTER_OTLP_* environment variables name (or localhost:4317), gRPC.
type Config struct {
	// Endpoint is where spans go; its form decides the protocol and TLS (Protocol, TLS and
	// Insecure can override):
	//   host:port or grpc://host:port   gRPC, plaintext (TLS when TLS.Enabled)
	//   grpcs://host:port               gRPC with TLS
	//   http://host:port[/path]         OTLP/HTTP, plaintext (path default /v1/traces)
	//   https://host:port[/path]        OTLP/HTTP with TLS
	// An http(s) URL on port 4317 means gRPC. An endpoint that fits none of these fails Validate.
	Endpoint string `yaml:"endpoint"`
	// Protocol is "grpc" or "http/protobuf" ("http" is accepted too); it wins over what the
	// endpoint implies. Empty (default): from the endpoint.
	Protocol string `yaml:"protocol"`
	// Insecure forces plaintext; it conflicts with a grpcs:// or https:// endpoint and with
	// TLS.Enabled.
	Insecure bool `yaml:"insecure"`
	// TLS configures TLS: enabled by the endpoint's scheme (grpcs, https) or by TLS.Enabled.
	TLS TLSConfig `yaml:"tls"`
	// Headers are sent with every request, e.g. an authorization header.
	Headers map[string]string `yaml:"headers"`
	// Compression is "" or "none" (default) or "gzip".
	Compression string `yaml:"compression"`
	// Timeout bounds one export attempt (default 10s).
	Timeout time.Duration `yaml:"timeout"`
	// QueueSize bounds the spans waiting to be sent, the batch being sent or retried included
	// (default 10,000).
	QueueSize int `yaml:"queueSize"`
	// MaxQueueBytes bounds the estimated bytes of the spans waiting to be sent (default 64 MiB).
	MaxQueueBytes int64 `yaml:"maxQueueBytes"`
	// BatchSize is the largest number of spans sent in one request (default 512).
	BatchSize int `yaml:"batchSize"`
	// MaxBatchBytes bounds the estimated size of one request (default 2 MiB, well below gRPC's
	// default 4 MiB receive limit); a span larger than it is sent alone. A request the receiver
	// refuses as too large is split in halves and sent again; a single span it refuses so is
	// dropped (counted, reason rejected).
	MaxBatchBytes int64 `yaml:"maxBatchBytes"`
	// FlushInterval is the longest a queued span waits for its batch to fill (default 2s).
	FlushInterval time.Duration `yaml:"flushInterval"`
	// EnqueueTimeout is how long Export waits for room in a full queue (default 1s; negative: no
	// wait). Then it refuses the spans (the sender retries them) or, with DropWhenFull, drops them.
	EnqueueTimeout time.Duration `yaml:"enqueueTimeout"`
	// DropWhenFull makes a full queue drop spans (counted, reason queue_full) instead of refusing
	// them; the sink then never reports itself busy, so the audit webhook is never answered 429
	// because of it. Default false: nothing is dropped while the queue is full.
	DropWhenFull bool `yaml:"dropWhenFull"`
	// MaxRetries is the number of retries of a failed batch before it is dropped (counted,
	// reason export_failed). Default 0: retry until it is sent (the queue then fills and the
	// sink reports itself busy); negative: no retry.
	MaxRetries int `yaml:"maxRetries"`
	// RetryBackoff is the wait before the first retry; it doubles for each further retry, up to
	// 30s (default 1s).
	RetryBackoff time.Duration `yaml:"retryBackoff"`
}

// TLSConfig configures TLS to the endpoint.
type TLSConfig struct {
	// Enabled turns TLS on for an endpoint whose form does not (host:port, grpc://, http://).
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM file of the CAs that the endpoint's certificate is checked against
	// (default: the system's).
	CAFile string `yaml:"caFile"`
	// CertFile and KeyFile are a client certificate and its key (PEM), for mutual TLS.
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
	// ServerName overrides the name checked in the endpoint's certificate.
	ServerName string `yaml:"serverName"`
	// InsecureSkipVerify accepts any certificate. For tests only.
	InsecureSkipVerify bool `yaml:"insecureSkipVerify"`
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = defaultTimeout
	}
	if c.QueueSize == 0 {
		c.QueueSize = defaultQueueSize
	}
	if c.MaxQueueBytes == 0 {
		c.MaxQueueBytes = defaultMaxQueueBytes
	}
	if c.BatchSize == 0 {
		c.BatchSize = defaultBatchSize
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = defaultMaxBatchBytes
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = defaultFlushInterval
	}
	if c.EnqueueTimeout == 0 {
		c.EnqueueTimeout = defaultEnqueueTimeout
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = defaultRetryBackoff
	}
	return c
}

// Validate reports a configuration that cannot work, an endpoint that cannot be parsed included.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Compression != "" && c.Compression != "none" && c.Compression != "gzip":
		return fmt.Errorf("otlpsink: compression %q is neither none nor gzip", c.Compression)
	case c.QueueSize < 0, c.BatchSize < 0, c.MaxQueueBytes < 0, c.MaxBatchBytes < 0:
		return errors.New("otlpsink: queueSize, maxQueueBytes and batchSize must not be negative")
	case c.Timeout < 0, c.FlushInterval < 0, c.RetryBackoff < 0:
		return errors.New("otlpsink: timeout, flushInterval and retryBackoff must not be negative")
	case (c.TLS.CertFile == "") != (c.TLS.KeyFile == ""):
		return errors.New("otlpsink: tls.certFile and tls.keyFile go together")
	}
	if _, err := c.target(); err != nil {
		return err
	}
	return nil
}

// target is where and how the sink sends, as the configuration decides it.
type target struct {
	protocol string // ProtocolGRPC or ProtocolHTTP
	hostPort string // empty: the exporter's default (environment variables)
	path     string // URL path, for HTTP
	tls      bool
	fromEnv  bool // no endpoint: TLS as the environment says unless Insecure or TLS.Enabled
}

// target parses the endpoint and applies Protocol, TLS and Insecure.
func (c Config) target() (target, error) {
	var t target
	switch c.Protocol {
	case "":
	case protocolGRPC:
		t.protocol = protocolGRPC
	case protocolHTTP, protocolHTTPShort:
		t.protocol = protocolHTTP
	default:
		return t, fmt.Errorf("otlpsink: protocol %q is neither %q nor %q", c.Protocol, protocolGRPC, protocolHTTP)
	}
	if c.Insecure && c.TLS.Enabled {
		return t, errors.New("otlpsink: insecure and tls.enabled contradict each other")
	}
	if c.Endpoint == "" {
		// The exporter reads OTEL_EXPORTER_OTLP_* (or uses localhost); TLS as it decides unless
		// said here.
		if t.protocol == "" {
			t.protocol = protocolGRPC
		}
		t.fromEnv, t.tls = true, c.TLS.Enabled
		return t, nil
	}
	scheme, rest := "", c.Endpoint
	if i := strings.Index(c.Endpoint, "://"); i >= 0 {
		scheme, rest = strings.ToLower(c.Endpoint[:i]), c.Endpoint[i+3:]
	}
	implied, schemeTLS := "", false
	switch scheme {
	case "", "grpc":
		implied = protocolGRPC
	case "grpcs":
		implied, schemeTLS = protocolGRPC, true
	case "http", "https":
		implied, schemeTLS = protocolHTTP, scheme == "https"
	default:
		return t, fmt.Errorf("otlpsink: endpoint %q: scheme %q is not one of grpc, grpcs, http, https", c.Endpoint, scheme)
	}
	hostPort, path := rest, ""
	if scheme != "" {
		u, err := url.Parse("x://" + rest)
		if err != nil {
			return t, fmt.Errorf("otlpsink: endpoint %q: %w", c.Endpoint, err)
		}
		if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return t, fmt.Errorf("otlpsink: endpoint %q: user info, query and fragment are not supported", c.Endpoint)
		}
		hostPort, path = u.Host, u.Path
	} else if strings.ContainsAny(rest, "/?#@") {
		return t, fmt.Errorf("otlpsink: endpoint %q: want host:port or a URL (grpc://, grpcs://, http://, https://)", c.Endpoint)
	}
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		return t, fmt.Errorf("otlpsink: endpoint %q: want host:port or a URL with a port: %w", c.Endpoint, err)
	}
	if n, perr := strconv.ParseUint(port, 10, 16); perr != nil || n == 0 {
		return t, fmt.Errorf("otlpsink: endpoint %q: port %q is not a number from 1 to 65535", c.Endpoint, port)
	}
	if host == "" {
		return t, fmt.Errorf("otlpsink: endpoint %q: no host", c.Endpoint)
	}
	if (scheme == "http" || scheme == "https") && port == grpcPort && path == "" {
		implied = protocolGRPC
	}
	if t.protocol == "" {
		t.protocol = implied
	}
	if schemeTLS && c.Insecure {
		return t, fmt.Errorf("otlpsink: endpoint %q asks for TLS but insecure is set", c.Endpoint)
	}
	t.hostPort, t.tls = hostPort, schemeTLS || c.TLS.Enabled
	if t.protocol == protocolHTTP {
		t.path = path
		if t.path == "" || t.path == "/" {
			t.path = "/v1/traces"
		}
	} else if path != "" && path != "/" {
		return t, fmt.Errorf("otlpsink: endpoint %q: a gRPC endpoint has no path", c.Endpoint)
	}
	return t, nil
}

// String describes the target for logs, e.g. "grpc+tls://collector:4317".
func (t target) String() string {
	s := "grpc"
	if t.protocol == protocolHTTP {
		s = "http"
	}
	if t.tls {
		s += "+tls"
	}
	hp := t.hostPort
	if hp == "" {
		hp = "(from OTEL_EXPORTER_OTLP_*)"
	}
	return s + "://" + hp + t.path
}

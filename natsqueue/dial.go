package natsqueue

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"go.yaml.in/yaml/v3"
)

// defaultName is the default connection name (Conn.Name, Config.Name).
const defaultName = "kelemetry"

// Conn are the settings of a NATS connection alone: the servers, TLS, credentials, and the
// timeouts of connecting and reconnecting. Dial takes them, for other users of NATS than the
// queue (remote linkers); Config has the same keys beside the stream's (Config.Conn). The zero
// value plus URLs is usable: WithDefaults fills the rest.
type Conn struct {
	// URLs are the NATS servers (nats://host:4222, tls://...); required.
	URLs []string `yaml:"urls"`
	// TLS configures TLS to the servers.
	TLS tlsConfig `yaml:"tls"`
	// CredentialsFile is a NATS credentials file (user JWT and NKey seed).
	CredentialsFile string `yaml:"credentialsFile"`
	// NKeySeedFile is a file holding an NKey seed (exclusive with CredentialsFile).
	NKeySeedFile string `yaml:"nkeySeedFile"`
	// ConnectTimeout bounds a connection attempt to one server (default 5s).
	ConnectTimeout time.Duration `yaml:"connectTimeout"`
	// ReconnectWait is the first wait between reconnection attempts; it doubles up to
	// MaxReconnectWait, with jitter (defaults 200ms and 5s).
	ReconnectWait time.Duration `yaml:"reconnectWait"`
	// MaxReconnectWait caps ReconnectWait's doubling.
	MaxReconnectWait time.Duration `yaml:"maxReconnectWait"`
	// Name is the connection's name shown by the server's monitoring (default "kelemetry").
	Name string `yaml:"name"`
}

// Conn returns the connection settings of c.
func (c Config) Conn() Conn {
	return Conn{URLs: c.URLs, TLS: c.TLS, CredentialsFile: c.CredentialsFile, NKeySeedFile: c.NKeySeedFile,
		ConnectTimeout: c.ConnectTimeout, ReconnectWait: c.ReconnectWait, MaxReconnectWait: c.MaxReconnectWait, Name: c.Name}
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Conn) WithDefaults() Conn {
	if c.Name == "" {
		c.Name = defaultName
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = defaultConnectTimeout
	}
	if c.ReconnectWait <= 0 {
		c.ReconnectWait = defaultReconnectWait
	}
	if c.MaxReconnectWait <= 0 {
		c.MaxReconnectWait = defaultMaxReconnectWait
	}
	return c
}

// Validate reports unusable connection settings: no URL, half a client certificate, both
// credential kinds, or files that cannot be read.
func (c Conn) Validate() error {
	var errs []error
	if len(c.URLs) == 0 {
		errs = append(errs, errors.New("urls: at least one NATS server is required"))
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		errs = append(errs, errors.New("tls: certFile and keyFile go together"))
	}
	if c.CredentialsFile != "" && c.NKeySeedFile != "" {
		errs = append(errs, errors.New("credentialsFile and nkeySeedFile are exclusive"))
	}
	for _, nf := range [][2]string{
		{"tls.caFile", c.TLS.CAFile}, {"tls.certFile", c.TLS.CertFile}, {"tls.keyFile", c.TLS.KeyFile},
		{"credentialsFile", c.CredentialsFile}, {"nkeySeedFile", c.NKeySeedFile},
	} {
		name, f := nf[0], nf[1]
		if f == "" {
			continue
		}
		if _, err := os.Stat(f); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// UnmarshalYAML decodes c strictly: an unknown key is an error naming its line, and a key of the
// queue's stream (stream, partitions, ackWait, ...: Config's keys that are not Conn's) is one
// that says so, since a connection alone has no stream.
func (c *Conn) UnmarshalYAML(node *yaml.Node) error {
	conn, queue := yamlKeys(reflect.TypeFor[Conn]()), yamlKeys(reflect.TypeFor[Config]())
	if err := knownKeys(node, "natsqueue.Conn", conn, func(key string) string {
		if slices.Contains(queue, key) {
			return fmt.Sprintf("%s is a setting of the audit queue's stream (audit.queue.nats), not of a NATS connection, which takes only %s: remove it",
				key, strings.Join(conn, ", "))
		}
		return ""
	}); err != nil {
		return err
	}
	type plain Conn
	return node.Decode((*plain)(c))
}

// UnmarshalYAML decodes t strictly: an unknown key is an error naming its line.
func (t *tlsConfig) UnmarshalYAML(node *yaml.Node) error {
	if err := knownKeys(node, "tls", yamlKeys(reflect.TypeFor[tlsConfig]()), nil); err != nil {
		return err
	}
	type plain tlsConfig
	return node.Decode((*plain)(t))
}

// knownKeys reports the keys of the mapping node that are not in keys, with their line: explain
// says why a key is refused ("" for the default message). Decoding through Node.Decode is not
// strict, even under a strict decoder, so an UnmarshalYAML checks its keys itself.
func knownKeys(node *yaml.Node, typ string, keys []string, explain func(key string) string) error {
	if node.Kind != yaml.MappingNode {
		return nil // Node.Decode reports the wrong kind
	}
	var errs []error
	for i := 0; i+1 < len(node.Content); i += 2 {
		k := node.Content[i]
		if slices.Contains(keys, k.Value) {
			continue
		}
		why := ""
		if explain != nil {
			why = explain(k.Value)
		}
		if why == "" {
			why = fmt.Sprintf("field %s not found in type %s", k.Value, typ)
		}
		errs = append(errs, fmt.Errorf("line %d: %s", k.Line, why))
	}
	return errors.Join(errs...)
}

// yamlKeys returns the yaml keys of the fields of the struct type t, in their order.
func yamlKeys(t reflect.Type) []string {
	var keys []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	return keys
}

// Dial opens a NATS connection with the connection settings c, for other users of NATS than the
// queue, e.g. remote linkers (a Config's are Config.Conn). It reconnects forever with backoff; a
// publish or request while disconnected fails at once instead of being buffered. A nil logger
// means slog.Default(). The caller closes (or drains) the connection.
func Dial(c Conn, logger *slog.Logger) (*nats.Conn, error) {
	c = c.WithDefaults()
	if len(c.URLs) == 0 {
		return nil, errors.New("natsqueue: dial: at least one NATS URL is required")
	}
	if logger == nil {
		logger = slog.Default()
	}
	nc, err := connect(c, logger)
	if err != nil {
		return nil, fmt.Errorf("natsqueue: %w", err)
	}
	return nc, nil
}

// connect opens a connection with the configured security, timeouts and reconnect backoff.
// Publishing while disconnected fails at once instead of being buffered, so that a producer
// learns that NATS is down within its timeout.
func connect(cfg Conn, log *slog.Logger) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.Timeout(cfg.ConnectTimeout),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true),
		nats.ReconnectBufSize(-1),
		nats.CustomReconnectDelay(func(attempts int) time.Duration {
			d := cfg.ReconnectWait
			for i := 1; i < attempts && d < cfg.MaxReconnectWait; i++ {
				d *= 2
			}
			d = min(d, cfg.MaxReconnectWait)
			return d/2 + rand.N(d/2+1) // math/rand: jitter, not security
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn("NATS disconnected", "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("NATS reconnected", "url", nc.ConnectedUrlRedacted())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			log.Warn("NATS asynchronous error", "err", err)
		}),
	}
	if cfg.TLS.CAFile != "" {
		opts = append(opts, nats.RootCAs(cfg.TLS.CAFile))
	}
	if cfg.TLS.CertFile != "" {
		opts = append(opts, nats.ClientCert(cfg.TLS.CertFile, cfg.TLS.KeyFile))
	}
	if cfg.CredentialsFile != "" {
		opts = append(opts, nats.UserCredentials(cfg.CredentialsFile))
	}
	if cfg.NKeySeedFile != "" {
		opt, err := nats.NkeyOptionFromSeed(cfg.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("read nkey seed: %w", err)
		}
		opts = append(opts, opt)
	}
	nc, err := nats.Connect(strings.Join(cfg.URLs, ","), opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS: %w", err)
	}
	return nc, nil
}

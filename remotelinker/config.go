package remotelinker

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kelemetry/kelemetry/natsqueue"
)

// Defaults of LinkerConfig and WorkerConfig.
const (
	// defaultSubjectPrefix starts the default subject of a linker: <prefix>.<name>.
	defaultSubjectPrefix = "kelemetry.link"
	// defaultQueue is the queue group the workers of a subject share.
	defaultQueue = "kelemetry-linkers"
	// defaultTimeout bounds one request; it is below aggregator.DefaultLinkTimeout (10s).
	defaultTimeout = 5 * time.Second
	// defaultMaxInFlight bounds a client's requests waiting for their reply.
	defaultMaxInFlight = 16
	// defaultMaxLinks bounds the links of one reply.
	defaultMaxLinks = 1000
	// defaultConcurrency bounds the jobs a worker runs at once.
	defaultConcurrency = 16
)

// Config lists the remote linkers of a Kelemetry process and how to reach NATS. The zero value
// has no remote linker and needs no NATS.
type Config struct {
	// NATS is the connection to NATS (urls, tls, credentialsFile, nkeySeedFile, connectTimeout,
	// reconnectWait, maxReconnectWait, name): a connection only, with no stream; the keys of the
	// audit queue's stream (stream, partitions, ...) are errors here.
	NATS natsqueue.Conn `yaml:"nats"`
	// Linkers are the remote linkers, each served by workers on its subject.
	Linkers []LinkerConfig `yaml:"linkers"`
}

// LinkerConfig is one remote linker, the client side.
type LinkerConfig struct {
	// Name is the linker's name (aggregator.Linker.Name, metrics' "linker" attribute); required,
	// one NATS subject token.
	Name string `yaml:"name"`
	// Subject is where its jobs go (default kelemetry.link.<name>).
	Subject string `yaml:"subject"`
	// Timeout bounds one request (default 5s); it must be below the aggregator's linkTimeout. A
	// worker that does not answer in time costs this linker's link of that object, counted as a
	// timeout.
	Timeout time.Duration `yaml:"timeout"`
	// MaxInFlight bounds the requests waiting for their reply (default 16); the aggregator runs
	// this many link workers for the linker. A Lookup over the bound is skipped and counted.
	MaxInFlight int `yaml:"maxInFlight"`
	// MaxLinks bounds the links of one reply (default 1000); a reply with more is refused.
	MaxLinks int `yaml:"maxLinks"`
}

// WithDefaults returns c with zero fields set to their defaults.
func (c LinkerConfig) WithDefaults() LinkerConfig {
	if c.Subject == "" && c.Name != "" {
		c.Subject = defaultSubjectPrefix + "." + c.Name
	}
	if c.Timeout <= 0 {
		c.Timeout = defaultTimeout
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = defaultMaxInFlight
	}
	if c.MaxLinks <= 0 {
		c.MaxLinks = defaultMaxLinks
	}
	return c
}

// Validate reports an unusable linker configuration.
func (c LinkerConfig) Validate() error {
	c = c.WithDefaults()
	var errs []error
	if c.Name == "" || strings.ContainsAny(c.Name, ". *>\t\r\n") {
		errs = append(errs, fmt.Errorf("name %q: must be a non-empty subject token (no '.', '*', '>' or whitespace)", c.Name))
	}
	if err := validSubject(c.Subject); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// withDefaults returns c with every linker's defaults set.
func (c Config) withDefaults() Config {
	linkers := make([]LinkerConfig, len(c.Linkers))
	for i, l := range c.Linkers {
		linkers[i] = l.WithDefaults()
	}
	c.Linkers = linkers
	return c
}

// Validate reports an unusable configuration: a bad linker, two linkers of one name, or, with
// linkers, unusable NATS connection settings. Without linkers every Config is valid.
func (c Config) Validate() error {
	if len(c.Linkers) == 0 {
		return nil
	}
	var errs []error
	seen := map[string]bool{}
	for i, l := range c.Linkers {
		if err := l.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("remote linker %d: %w", i, err))
		}
		if seen[l.Name] {
			errs = append(errs, fmt.Errorf("remote linker %q: configured twice", l.Name))
		}
		seen[l.Name] = true
	}
	if err := c.NATS.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("nats: %w", err))
	}
	return errors.Join(errs...)
}

// ValidateTimeouts reports a linker whose Timeout is not below linkTimeout, the aggregator's
// bound of one link job (which would cut the request before the linker's own timeout counts it).
func (c Config) ValidateTimeouts(linkTimeout time.Duration) error {
	var errs []error
	for _, l := range c.withDefaults().Linkers {
		if l.Timeout >= linkTimeout {
			errs = append(errs, fmt.Errorf("remote linker %q: timeout %s must be below the aggregator's linkTimeout %s", l.Name, l.Timeout, linkTimeout))
		}
	}
	return errors.Join(errs...)
}

// WorkerConfig configures a Worker.
type WorkerConfig struct {
	// Subject is where the jobs come from (default kelemetry.link.<the linker's name>): the
	// Subject of the linker's LinkerConfig on the Kelemetry side.
	Subject string `yaml:"subject"`
	// Queue is the queue group the workers of the subject share (default kelemetry-linkers): each
	// job goes to one of them.
	Queue string `yaml:"queue"`
	// Concurrency bounds the jobs run at once (default 16); a job over the bound is answered
	// with codeBusy at once.
	Concurrency int `yaml:"concurrency"`
	// Timeout bounds one Lookup (default 5s); the job's own TimeoutMillis shortens it.
	Timeout time.Duration `yaml:"timeout"`
}

// withDefaults returns c with zero fields set, name being the linker's name.
func (c WorkerConfig) withDefaults(name string) WorkerConfig {
	if c.Subject == "" {
		c.Subject = defaultSubjectPrefix + "." + name
	}
	if c.Queue == "" {
		c.Queue = defaultQueue
	}
	if c.Concurrency <= 0 {
		c.Concurrency = defaultConcurrency
	}
	if c.Timeout <= 0 {
		c.Timeout = defaultTimeout
	}
	return c
}

func validSubject(s string) error {
	for _, tok := range strings.Split(s, ".") {
		if tok == "" || strings.ContainsAny(tok, " *>\t\r\n") {
			return fmt.Errorf("subject %q: tokens must be non-empty literals", s)
		}
	}
	return nil
}

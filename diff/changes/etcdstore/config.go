package etcdstore

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Defaults for Config.
const (
	defaultPrefix         = "/kelemetry/diff/"
	defaultTTL            = 10 * time.Minute
	defaultDialTimeout    = 5 * time.Second
	defaultRequestTimeout = 5 * time.Second
	defaultMaxValueBytes  = 256 << 10
	defaultMaxQueue       = 10_000
	defaultMaxQueueBytes  = 32 << 20
)

// etcdMinTTL is etcd's smallest lease TTL with its default timing (1.5 election timeouts of 1s,
// rounded up); a shorter TTL would silently be raised by the server.
const etcdMinTTL = 2 * time.Second

// Config configures the etcd backend of the informer diff's change store (informer.StoreConfig.Etcd),
// shared by replicas. Zero fields mean defaults.
type Config struct {
	// Endpoints are the etcd client URLs, e.g. https://etcd-0:2379 (required).
	Endpoints []string `yaml:"endpoints"`
	// Prefix is put before every key (default /kelemetry/diff/); it should end with "/".
	Prefix string `yaml:"prefix"`
	// TTL is the lease of every key (default 10m, at least 2s): records live between TTL and
	// TTL + TTL/10 (keys written within TTL/10 share a lease).
	TTL time.Duration `yaml:"ttl"`
	// DialTimeout bounds connecting (default 5s); RequestTimeout each request (default 5s).
	DialTimeout    time.Duration `yaml:"dialTimeout"`
	RequestTimeout time.Duration `yaml:"requestTimeout"`
	// Username and Password authenticate with etcd's auth; PasswordFile, when set, holds the
	// password instead (read once, trailing newline removed).
	Username     string `yaml:"username"`
	Password     string `yaml:"password"`
	PasswordFile string `yaml:"passwordFile"`
	// CAFile verifies the server's certificate (default: the system roots); CertFile and KeyFile
	// are the client's certificate, both or neither. ServerName overrides the name checked.
	// Setting any of them, or an https:// endpoint, turns TLS on (http:// endpoints are then
	// dialed with TLS too).
	CAFile     string `yaml:"caFile"`
	CertFile   string `yaml:"certFile"`
	KeyFile    string `yaml:"keyFile"`
	ServerName string `yaml:"serverName"`
	// MaxValueBytes bounds a stored value after compression (default 256 KiB); larger records
	// are not written (counted, reason too_large).
	MaxValueBytes int `yaml:"maxValueBytes"`
	// MaxQueue and MaxQueueBytes bound the records waiting to be written (default 10,000 and
	// 32 MiB); beyond them records are dropped (counted, reason queue_full).
	MaxQueue      int   `yaml:"maxQueue"`
	MaxQueueBytes int64 `yaml:"maxQueueBytes"`
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = defaultPrefix
	}
	if c.TTL == 0 {
		c.TTL = defaultTTL
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = defaultDialTimeout
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = defaultRequestTimeout
	}
	if c.MaxValueBytes == 0 {
		c.MaxValueBytes = defaultMaxValueBytes
	}
	if c.MaxQueue == 0 {
		c.MaxQueue = defaultMaxQueue
	}
	if c.MaxQueueBytes == 0 {
		c.MaxQueueBytes = defaultMaxQueueBytes
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	var errs []error
	if len(c.Endpoints) == 0 {
		errs = append(errs, errors.New("diff informer cache: the etcd backend needs endpoints"))
	}
	for _, ep := range c.Endpoints {
		if ep == "" || strings.ContainsAny(ep, " \t\n") {
			errs = append(errs, fmt.Errorf("diff informer cache: bad etcd endpoint %q", ep))
		}
	}
	if c.TTL < 0 || c.DialTimeout < 0 || c.RequestTimeout < 0 || c.MaxValueBytes < 0 || c.MaxQueue < 0 || c.MaxQueueBytes < 0 {
		errs = append(errs, errors.New("diff informer cache: etcd durations and bounds must not be negative"))
	}
	if c.TTL != 0 && c.TTL < etcdMinTTL {
		errs = append(errs, fmt.Errorf("diff informer cache: etcd ttl %s is below etcd's minimum lease of %s", c.TTL, etcdMinTTL))
	}
	if c.TTL%time.Second != 0 {
		errs = append(errs, fmt.Errorf("diff informer cache: etcd ttl %s is not whole seconds (etcd leases are)", c.TTL))
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, errors.New("diff informer cache: etcd certFile and keyFile go together"))
	}
	if c.Password != "" && c.PasswordFile != "" {
		errs = append(errs, errors.New("diff informer cache: etcd password and passwordFile are exclusive"))
	}
	if (c.Password != "" || c.PasswordFile != "") && c.Username == "" {
		errs = append(errs, errors.New("diff informer cache: an etcd password needs a username"))
	}
	if c.Prefix != "" && !strings.HasSuffix(c.Prefix, "/") {
		errs = append(errs, fmt.Errorf("diff informer cache: etcd prefix %q must end with \"/\"", c.Prefix))
	}
	return errors.Join(errs...)
}

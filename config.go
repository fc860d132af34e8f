package kelemetry

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"go.yaml.in/yaml/v3"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit"
	"github.com/kelemetry/kelemetry/diff"
	"github.com/kelemetry/kelemetry/event"
	"github.com/kelemetry/kelemetry/linker"
	"github.com/kelemetry/kelemetry/otlpsink"
	"github.com/kelemetry/kelemetry/store"
)

// Config configures the whole application. The zero value works: an in-memory store, the audit
// webhook on :8080 and the API on :16686. Mains fill it from flags or a YAML file (LoadConfig).
type Config struct {
	// Cluster names the cluster of input that does not name one (webhook /audit, log files).
	Cluster string `yaml:"cluster"`
	// AuditAddr is the listen address of the audit webhook (default :8080).
	AuditAddr string `yaml:"auditAddr"`
	// HTTPAddr is the listen address of the API, /metrics and /healthz (default :16686).
	HTTPAddr string `yaml:"httpAddr"`
	// DataDir holds the embedded store; empty keeps traces in memory only.
	DataDir string `yaml:"dataDir"`
	// Kubeconfig, when set, lets linkers fetch objects the audit stream did not carry.
	Kubeconfig string `yaml:"kubeconfig"`

	Aggregator aggregator.Config `yaml:"aggregator"`
	Audit      audit.Config      `yaml:"audit"`
	Event      event.Config      `yaml:"event"`
	// InformerDiff diffs objects from informers, for clusters audited at Metadata level (the
	// all-in-one enables it with a kubeconfig).
	InformerDiff diff.InformerModuleConfig `yaml:"informerDiff"`
	Linker       linker.Config             `yaml:"linker"`
	Store        store.PebbleConfig        `yaml:"store"`
	Memory       store.MemoryConfig        `yaml:"memory"`
	OTLP         otlpsink.Config           `yaml:"otlp"`
}

// Defaults for Config.
const (
	DefaultAuditAddr = ":8080"
	DefaultHTTPAddr  = ":16686"
	DefaultCluster   = "default"
)

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Cluster == "" {
		c.Cluster = DefaultCluster
	}
	if c.AuditAddr == "" {
		c.AuditAddr = DefaultAuditAddr
	}
	if c.HTTPAddr == "" {
		c.HTTPAddr = DefaultHTTPAddr
	}
	if c.Audit.Cluster == "" {
		c.Audit.Cluster = c.Cluster
	}
	if c.DataDir != "" && c.Store.Dir == "" {
		c.Store.Dir = c.DataDir
	}
	if c.Event.Cluster == "" {
		c.Event.Cluster = c.Cluster
	}
	if c.Event.Window == 0 {
		c.Event.Window = c.Aggregator.Window
	}
	if c.Store.Window == 0 {
		c.Store.Window = c.Aggregator.Window
	}
	if c.Memory.Window == 0 {
		c.Memory.Window = c.Aggregator.Window
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	c = c.WithDefaults()
	errs := []error{c.Aggregator.Validate(), c.Audit.Validate(), c.Event.Validate(), c.Linker.Validate(), c.InformerDiff.Validate()}
	if c.InformerDiff.Enabled && c.Kubeconfig == "" {
		errs = append(errs, errors.New("informerDiff.enabled needs a kubeconfig"))
	}
	if c.Event.Watch && c.Kubeconfig == "" {
		errs = append(errs, errors.New("event.watch needs a kubeconfig"))
	}
	if c.DataDir != "" {
		errs = append(errs, c.Store.Validate())
	} else {
		errs = append(errs, c.Memory.Validate())
	}
	if c.OTLP.Endpoint != "" {
		errs = append(errs, c.OTLP.Validate())
	}
	return errors.Join(errs...)
}

// LoadConfig reads a YAML configuration file. Unknown fields are errors.
func LoadConfig(path string) (Config, error) {
	var c Config
	data, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("read config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return c, fmt.Errorf("parse config %s: %w", path, err)
	}
	return c, nil
}

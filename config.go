package kelemetry

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit"
	"github.com/kelemetry/kelemetry/audit/apitrace"
	"github.com/kelemetry/kelemetry/diff/informer"
	"github.com/kelemetry/kelemetry/event"
	"github.com/kelemetry/kelemetry/frontend"
	"github.com/kelemetry/kelemetry/httpserver"
	"github.com/kelemetry/kelemetry/internal/configfile"
	"github.com/kelemetry/kelemetry/internal/memlimit"
	"github.com/kelemetry/kelemetry/kelemetrix"
	"github.com/kelemetry/kelemetry/kube"
	"github.com/kelemetry/kelemetry/linker"
	"github.com/kelemetry/kelemetry/linkrule"
	"github.com/kelemetry/kelemetry/otlpsink"
	"github.com/kelemetry/kelemetry/remotelinker"
	"github.com/kelemetry/kelemetry/storageapi"
	"github.com/kelemetry/kelemetry/store"
	"github.com/kelemetry/kelemetry/store/jaeger"
	"github.com/kelemetry/kelemetry/store/memory"
	"github.com/kelemetry/kelemetry/store/pebble"
)

// Roles of Config.Role.
const (
	// RoleAll ingests and serves queries (the default).
	RoleAll = "all"
	// roleIngest receives audit events, Kubernetes Events and informer diffs, links objects and
	// writes spans; it serves no queries.
	RoleIngest = "ingest"
	// roleQuery serves the APIs, the web UI and the storage API from the store; it ingests nothing.
	RoleQuery = "query"
)

// Config configures the whole application. The zero value works: an in-memory store, the audit
// webhook on 127.0.0.1:8080 and the API on 127.0.0.1:16686 (localhost only, plain HTTP, no
// authentication). Mains fill it from flags or a YAML file (LoadConfig).
type Config struct {
	// Cluster names the cluster of input that does not name one (webhook /audit, log files).
	Cluster string `yaml:"cluster"`
	// AuditAddr is the listen address of the audit webhook (default 127.0.0.1:8080).
	AuditAddr string `yaml:"auditAddr"`
	// HTTPAddr is the listen address of the API, the UI, /metrics and /healthz (default
	// 127.0.0.1:16686).
	HTTPAddr string `yaml:"httpAddr"`
	// HTTPTimeouts bound slow clients on both listeners (defaults: headers 10s, whole request
	// 30s, idle connection 2m).
	HTTPTimeouts httpserver.Timeouts `yaml:"httpTimeouts"`
	// HTTPMaxConnections bounds the connections each listener (audit, API, remote storage) keeps
	// open at once (default 1024; negative: no limit). One more is reset at once and counted
	// (kelemetry_listener_refused_connections_total); kube-apiserver retries it.
	HTTPMaxConnections int `yaml:"httpMaxConnections"`
	// AuditTLS serves the audit webhook over TLS (certificate and key files, reloaded when
	// they change).
	AuditTLS httpserver.TLSConfig `yaml:"auditTLS"`
	// AuditAuth authenticates the webhook's senders: client certificates of a CA, bearer tokens.
	AuditAuth httpserver.AuditAuthConfig `yaml:"auditAuth"`
	// HTTPTLS serves the API listener over TLS.
	HTTPTLS httpserver.TLSConfig `yaml:"httpTLS"`
	// HTTPAuth authenticates the API's users: bearer tokens, or an authenticating proxy.
	HTTPAuth httpserver.APIAuthConfig `yaml:"httpAuth"`
	// OTLPAddr is the listen address of the OTLP receiver (OTLP/gRPC and OTLP/HTTP on one port;
	// default 127.0.0.1:4317 when apiserverTraces or audit.otlpLogs is enabled, otherwise no
	// listener).
	OTLPAddr string `yaml:"otlpAddr"`
	// OTLPTLS serves the OTLP receiver over TLS; OTLPAuth authenticates its senders (client
	// certificates of a CA, bearer tokens).
	OTLPTLS  httpserver.TLSConfig       `yaml:"otlpTLS"`
	OTLPAuth httpserver.AuditAuthConfig `yaml:"otlpAuth"`
	// APIServerTraces joins kube-apiserver's own request traces (received on OTLPAddr) to the
	// audit events, under each event's span (see package audit/apitrace). Off by default.
	APIServerTraces apitrace.Config `yaml:"apiserverTraces"`
	// DataDir holds the embedded store; empty keeps traces in memory only.
	DataDir string `yaml:"dataDir"`
	// Kubeconfig, when set, is the kubeconfig of the cluster named Cluster: linkers fetch objects
	// the audit stream did not carry, the Event and informer sources watch it. Shorthand for an
	// entry of Clusters.
	Kubeconfig string `yaml:"kubeconfig"`
	// Clusters names further clusters (or all of them) and how to reach them. Link rules and
	// parent-link annotations resolve targets in any of them; the audit webhook path
	// /audit/{cluster} names the cluster of a batch.
	Clusters []kube.ClusterConfig `yaml:"clusters"`
	// Window is the length of one trace's time window, aligned to the Unix epoch (default 30m):
	// one value for every part (see aggregator.Window).
	Window time.Duration `yaml:"window"`
	// ObjectCache configures the cache of objects that linkers fetch from the API servers.
	ObjectCache kube.ObjectCacheConfig `yaml:"objectCache"`
	// Discovery configures how kinds are mapped to resources with the clusters' discovery APIs.
	Discovery kube.DiscoveryConfig `yaml:"discovery"`

	Aggregator aggregator.Config `yaml:"aggregator"`
	Audit      audit.Config      `yaml:"audit"`
	Event      event.Config      `yaml:"event"`
	// InformerDiff diffs objects from informers, for clusters audited at Metadata level (the
	// all-in-one enables it with a kubeconfig).
	InformerDiff informer.ModuleConfig `yaml:"informerDiff"`
	Linker       linker.Config         `yaml:"linker"`
	// LinkRules configures the LinkRule linker: a directory of rule files, and the watch of
	// LinkRule objects in the cluster named Cluster (on when it has a kubeconfig).
	LinkRules linkrule.Config `yaml:"linkRules"`
	// RemoteLinkers are linkers served by other processes over NATS (remoteLinkers.linkers:
	// name, subject, timeout, maxInFlight) and the NATS connection (remoteLinkers.nats: urls,
	// tls, credentialsFile, nkeySeedFile, ...); see package remotelinker and examples/linkerworker.
	RemoteLinkers remotelinker.Config `yaml:"remoteLinkers"`
	// Role is "all" (default), "ingest" or "query": mains compose Modules(Role) (Module is the
	// "all" bundle whatever Role says). Replicas of several roles share traces through
	// StoreBackend "jaeger".
	Role string `yaml:"role"`
	// StoreBackend is "embedded" (in DataDir), "memory", or "jaeger" (configured by Jaeger); empty
	// means embedded with a DataDir, memory without.
	StoreBackend string `yaml:"storeBackend"`
	// Jaeger configures the jaeger store backend: spans written over OTLP to a Jaeger collector and
	// read back through Jaeger's remote storage API, shared by every replica (see
	// package store/jaeger and docs/operations/scaling.md).
	Jaeger jaeger.Config `yaml:"jaeger"`
	// Store configures the embedded store in DataDir; Memory the in-memory one (DataDir "").
	Store  pebble.Config   `yaml:"store"`
	Memory memory.Config   `yaml:"memory"`
	OTLP   otlpsink.Config `yaml:"otlp"`
	// RemoteStorageAddr, when set, serves the merged trees through Jaeger's remote storage API
	// (jaeger.storage.v2 gRPC, with gRPC health and reflection) on this HOST:PORT, for a stock
	// Jaeger v2 with a "grpc" storage backend (see package storageapi). Empty (the default):
	// off. It takes the API's HTTPTLS and HTTPAuth.TokenFiles (bearer tokens as gRPC metadata).
	RemoteStorageAddr string `yaml:"remoteStorageAddr"`
	// Kelemetrix defines metrics computed from the audit stream, reads included (see package
	// kelemetrix and deploy/kelemetrix.yaml); none by default.
	Kelemetrix kelemetrix.Config `yaml:"kelemetrix"`
	// Query bounds what one query may cost (spans read, bytes rendered, time, link budgets) and
	// how many heavy queries run at once, and with how much memory (see frontend.Config).
	Query frontend.Config `yaml:"query"`
	// MemoryLimit sets the Go runtime's soft memory limit (GOMEMLIMIT), so that the garbage
	// collector collects harder as the heap nears the container's limit instead of leaving
	// garbage for the OOM killer: "" (the default) is 85% of the container's memory limit
	// (cgroup v2 memory.max, cgroup v1 memory.limit_in_bytes: the lowest of the process's cgroup
	// and those above it) when it has one, none otherwise; "N%" is another share of it; a size
	// ("1700MiB", "2Gi", "1073741824") is that limit; "off" or "0" sets none. A GOMEMLIMIT
	// environment variable always wins. Mains apply it with ApplyMemoryLimit before building the
	// application; query.maxMemoryBytes defaults to 40% of the limit in effect.
	MemoryLimit string `yaml:"memoryLimit"`
}

// Defaults for Config.
const (
	DefaultAuditAddr = httpserver.DefaultAuditAddr
	DefaultHTTPAddr  = httpserver.DefaultAPIAddr
	// DefaultOTLPAddr is the OTLP receiver's address when apiserverTraces or audit.otlpLogs is
	// enabled.
	DefaultOTLPAddr  = "127.0.0.1:4317"
	DefaultCluster   = "default"
	DefaultKubeQPS   = kube.DefaultQPS
	DefaultKubeBurst = kube.DefaultBurst
)

// kube returns the configuration of package kube: Kubeconfig as the cluster named Cluster first,
// then Clusters (an entry without a name is the cluster named Cluster), with ObjectCache and
// Discovery.
func (c Config) kube() kube.Config {
	c = c.WithDefaults()
	return kube.Config{
		Clusters:    kube.ClustersFrom(c.Cluster, c.Kubeconfig, c.Clusters),
		ObjectCache: c.ObjectCache,
		Discovery:   c.Discovery,
	}
}

// KubeClusters returns every configured cluster with defaults applied (see Kube).
func (c Config) KubeClusters() []kube.ClusterConfig {
	return c.kube().WithDefaults().Clusters
}

// HasCluster reports whether a cluster of that name is configured.
func (c Config) HasCluster(name string) bool {
	return c.kube().Has(name)
}

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
	if c.OTLPAddr == "" && (c.APIServerTraces.Enabled || c.Audit.OTLPLogs.Enabled) {
		c.OTLPAddr = DefaultOTLPAddr
	}
	if c.Audit.Cluster == "" {
		c.Audit.Cluster = c.Cluster
	}
	if c.DataDir != "" && c.Store.Dir == "" {
		c.Store.Dir = c.DataDir
	}
	if c.DataDir != "" && c.Audit.Queue.Dir == "" && !c.Audit.Queue.IsNATS() {
		// The audit queue is durable (audit.queue.durable unset or true) in the data folder,
		// unless it is on NATS (audit.queue.nats.urls).
		c.Audit.Queue.Dir = filepath.Join(c.DataDir, "audit-queue")
	}
	if c.Event.Cluster == "" {
		c.Event.Cluster = c.Cluster
	}
	if c.LinkRules.Cluster == "" {
		c.LinkRules.Cluster = c.Cluster
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	c = c.WithDefaults()
	if err := aggregator.ValidateClusterName(c.Cluster); err != nil {
		// The audit, event and link rule configurations take this name too: one error is enough.
		return fmt.Errorf("cluster: %w", err)
	}
	errs := []error{validateMemoryLimit(c.MemoryLimit), aggregator.Window(c.Window).Validate(), c.Aggregator.Validate(), c.Audit.Validate(), c.Event.Validate(), c.Linker.Validate(), c.InformerDiff.Validate(), c.kube().Validate(), c.LinkRules.Validate(), c.Query.Validate(), c.Kelemetrix.Validate(), c.APIServerTraces.Validate()}
	if c.InformerDiff.Enabled && len(c.KubeClusters()) == 0 {
		errs = append(errs, errors.New("informerDiff.enabled needs a kubeconfig"))
	}
	for _, name := range c.InformerDiff.Clusters {
		if !c.HasCluster(name) {
			errs = append(errs, fmt.Errorf("informerDiff.clusters: cluster %q has no kubeconfig", name))
		}
	}
	if c.Event.Watch && !c.HasCluster(c.Event.Cluster) {
		errs = append(errs, fmt.Errorf("event.watch needs a kubeconfig of cluster %q", c.Event.Cluster))
	}
	for _, name := range c.Event.WatchClusters {
		if !c.HasCluster(name) {
			errs = append(errs, fmt.Errorf("event.watchClusters: cluster %q has no kubeconfig", name))
		}
	}
	errs = append(errs, c.http().Validate(), c.storeConfig().Validate(), c.RemoteStorage().Validate())
	if st := c.Store; st.Dir == "" && st != (pebble.Config{}) {
		// The embedded store's keys are set but the store is in memory (no dataDir): still refuse
		// values it would refuse, so that a mistake shows before the folder is configured.
		st.Dir = "unset"
		errs = append(errs, st.Validate())
	}
	if len(c.RemoteLinkers.Linkers) > 0 {
		errs = append(errs, c.RemoteLinkers.Validate(), c.RemoteLinkers.ValidateTimeouts(c.Aggregator.WithDefaults().LinkTimeout))
	}
	switch c.Role {
	case "", RoleAll, RoleIngest, RoleQuery:
	default:
		errs = append(errs, fmt.Errorf("role %q: want %q, %q or %q", c.Role, RoleAll, RoleIngest, RoleQuery))
	}
	if c.Role != RoleQuery && c.storeConfig().WithDefaults().Backend == store.BackendJaeger && c.Jaeger.OTLP.Endpoint == "" {
		errs = append(errs, errors.New("storeBackend jaeger: ingesting needs jaeger.otlp.endpoint (the OTLP receiver of the Jaeger collector); a query replica sets role query"))
	}
	if c.RemoteStorageAddr != "" && c.HTTPAuth.Enabled() && len(c.HTTPAuth.TokenFiles) == 0 {
		errs = append(errs, errors.New("remoteStorageAddr: the API is authenticated by a proxy only; the storage API needs httpAuth.tokenFiles"))
	}
	if c.OTLP.Endpoint != "" {
		errs = append(errs, c.OTLP.Validate())
	}
	return errors.Join(errs...)
}

func validateMemoryLimit(s string) error {
	if _, err := memlimit.Parse(s); err != nil {
		return fmt.Errorf("memoryLimit: %w", err)
	}
	return nil
}

// ApplyMemoryLimit sets the Go runtime's memory limit as MemoryLimit says, unless the GOMEMLIMIT
// environment variable is set, and logs once what it set and why. It returns the limit in
// effect, 0 when none. Mains call it once, before building the application: the query
// frontend's memory budget (query.maxMemoryBytes) defaults to a share of the limit in effect
// when it is built. It fails only on an invalid MemoryLimit (Validate reports it too).
func (c Config) ApplyMemoryLimit(logger *slog.Logger) (int64, error) {
	s, err := memlimit.Parse(c.MemoryLimit)
	if err != nil {
		return 0, fmt.Errorf("memoryLimit: %w", err)
	}
	return memlimit.Apply(logger, s, os.Getenv, os.DirFS("/")), nil
}

// RemoteStorage is the configuration of the jaeger.storage.v2 listener (package storageapi):
// RemoteStorageAddr with the API's TLS and bearer tokens.
func (c Config) RemoteStorage() storageapi.Config {
	return storageapi.Config{Addr: c.RemoteStorageAddr, TLS: c.HTTPTLS, TokenFiles: c.HTTPAuth.TokenFiles,
		MaxConnections: c.HTTPMaxConnections, IdleTimeout: c.HTTPTimeouts.Idle, HandshakeTimeout: c.HTTPTimeouts.ReadHeader}
}

// http is the configuration of the listeners (package httpserver).
func (c Config) http() httpserver.Config {
	c = c.WithDefaults()
	return httpserver.Config{AuditAddr: c.AuditAddr, APIAddr: c.HTTPAddr, Timeouts: c.HTTPTimeouts,
		MaxConnections: c.HTTPMaxConnections, AuditTLS: c.AuditTLS, AuditAuth: c.AuditAuth,
		APITLS: c.HTTPTLS, APIAuth: c.HTTPAuth, OTLPAddr: c.OTLPAddr, OTLPTLS: c.OTLPTLS, OTLPAuth: c.OTLPAuth}
}

// storeConfig is the store configuration: the embedded store in DataDir, or memory without one.
func (c Config) storeConfig() store.Config {
	c = c.WithDefaults()
	return store.Config{Backend: c.StoreBackend, Embedded: c.Store, Memory: c.Memory, Jaeger: c.Jaeger}
}

// LoadConfig reads a YAML configuration file strictly: unknown keys (with the closest known key,
// or where a moved key went) and values of the wrong type (with an example) are errors, one line
// each with the file and line. Sizes of keys that hold bytes may have a unit (10Gi).
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("read config: %w", err)
	}
	var c Config
	if err := configfile.Decode(data, &c, configfile.Options{File: path, Moved: configfile.Moved}); err != nil {
		return Config{}, err
	}
	return c, nil
}

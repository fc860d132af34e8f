package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kelemetry/kelemetry"
	"github.com/kelemetry/kelemetry/audit/tap"
	"github.com/kelemetry/kelemetry/internal/configfile"
	"github.com/kelemetry/kelemetry/kelemetrix"
	"github.com/kelemetry/kelemetry/kube"
	"github.com/kelemetry/kelemetry/remotelinker"
	"github.com/spf13/pflag"
)

// errShowVersion is what parseFlags returns for --version.
var errShowVersion = errors.New("--version")

// parseMember parses I/N of --audit-queue-nats-member.
func parseMember(v string) (member, members int, err error) {
	is, ns, ok := strings.Cut(v, "/")
	if ok {
		member, err = strconv.Atoi(is)
		if err == nil {
			members, err = strconv.Atoi(ns)
		}
	}
	if !ok || err != nil || members < 1 || member < 0 || member >= members {
		return 0, 0, fmt.Errorf("%q: want I/N with 0 <= I < N, e.g. 2/3", v)
	}
	return member, members, nil
}

// parseFlags builds the configuration: defaults, then the YAML file of --config, then the flags
// given on the command line.
func parseFlags(args []string, stderr io.Writer) (kelemetry.Config, slog.Level, error) {
	var pprofAddr string
	return parseConfigFlags(args, stderr, &pprofAddr)
}

// parseConfigFlags is parseFlags that also sets *pprofAddr from --pprof-addr, a process option
// outside kelemetry.Config.
func parseConfigFlags(args []string, stderr io.Writer, pprofAddr *string) (kelemetry.Config, slog.Level, error) {
	fs, build := newFlagSet(stderr, pprofAddr)
	if err := fs.Parse(args); err != nil {
		return kelemetry.Config{}, 0, err
	}
	return build(true)
}

// newFlagSet defines the all-in-one's flags on a new flag set that writes its usage and errors to
// stderr, and parses and runs nothing: docs/reference/cli.md is generated from it. build, called
// after fs.Parse, turns the parsed flags into the configuration (see parseFlags), validated when
// validate is true (print-config shows a configuration whose files exist only where it runs).
func newFlagSet(stderr io.Writer, pprofAddr *string) (fs *pflag.FlagSet, build func(validate bool) (kelemetry.Config, slog.Level, error)) {
	fs = pflag.NewFlagSet("kelemetry", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.StringVar(pprofAddr, "pprof-addr", "", "serve Go's net/http/pprof profiles (/debug/pprof/) on HOST:PORT, unauthenticated: bind to localhost (off when empty)")
	fs.SetOutput(stderr)
	var (
		configFile = fs.String("config", "", "YAML configuration file (flags given on the command line override it)")
		cluster    = fs.String("cluster", kelemetry.DefaultCluster, "cluster name for input that does not name one (webhook /audit, log files)")
		auditAddr  = fs.String("audit-addr", kelemetry.DefaultAuditAddr, "listen address of the audit webhook (POST /audit, /audit/{cluster})")
		httpAddr   = fs.String("http-addr", kelemetry.DefaultHTTPAddr, "listen address of the API, /metrics and /healthz")
		dataDir    = fs.String("data-dir", "./kelemetry-data", `directory of the embedded trace store; "" keeps traces in memory`)
		window     = fs.Duration("window", 0, "trace window length (default 30m)")
		kubeconfig = fs.String("kubeconfig", "", "kubeconfig of the cluster, for fetching objects the audit stream did not carry (optional)")
		otlp       = fs.String("otlp-endpoint", "", "also export spans over OTLP: host:port or grpc://host:port (gRPC, plaintext), grpcs://host:port (gRPC, TLS), http://host:4318 or https://host:4318 (OTLP/HTTP)")
		otlpAddr   = fs.String("otlp-addr", "", "listen address of the OTLP receiver (OTLP/gRPC and OTLP/HTTP on one port; default 127.0.0.1:4317 with --apiserver-traces)")
		apiTraces  = fs.Bool("apiserver-traces", false, "join kube-apiserver's own request traces (sent to --otlp-addr by its --tracing-config-file) to the audit events: webhooks, etcd calls under each write")
		remoteStor = fs.String("remote-storage-addr", "", "serve the merged trees through Jaeger's remote storage API (jaeger.storage.v2 gRPC, with health and reflection) on HOST:PORT, for a stock Jaeger v2 (off when empty)")
		role       = fs.String("role", kelemetry.RoleAll, `"all" (ingest and serve queries), "ingest" (no query APIs or UI) or "query" (no webhook or ingestion)`)
		storeBack  = fs.String("store-backend", "", `trace store: "embedded" (in --data-dir), "memory", or "jaeger" (shared by replicas: --jaeger-endpoint and --jaeger-otlp-endpoint); default embedded, memory with --data-dir ""`)
		jaegerEP   = fs.String("jaeger-endpoint", "", "with --store-backend jaeger: Jaeger's remote storage API (jaeger.storage.v2 gRPC) to read traces from, host:port or grpcs://host:port")
		jaegerOTLP = fs.String("jaeger-otlp-endpoint", "", "with --store-backend jaeger: the Jaeger collector's OTLP receiver to write spans to (forms as --otlp-endpoint); not needed with --role query")
		durableQ   = fs.Bool("audit-queue-durable", true, "with --data-dir: write each audit webhook batch to <data-dir>/audit-queue (fsync'd) before answering 200, and replay what was not handled after a crash; false keeps the queue in memory")
		natsURLs   = fs.String("audit-queue-nats", "", "NATS server URL[,URL...]: queue audit events on NATS JetStream (stream KELEMETRY_AUDIT) instead of the durable local queue; every replica with it publishes and consumes (docs/ingest/nats.md)")
		natsCreds  = fs.String("audit-queue-nats-creds", "", "with --audit-queue-nats: NATS credentials file (user JWT and NKey seed)")
		natsMember = fs.String("audit-queue-nats-member", "", "with --audit-queue-nats: static membership I/N (e.g. a StatefulSet ordinal and the replica count): this replica owns the partitions p with p % N == I; the partitions of members not live go to the live ones (p modulo their number) and back to their owner when it returns")
		memLimit   = fs.String("memory-limit", "", `Go memory limit (GOMEMLIMIT): empty is 85% of the container's memory limit (cgroup), "N%" another share of it, a size such as 1700MiB or 2Gi, or "off"; a GOMEMLIMIT environment variable wins`)
		logLevel   = fs.String("log-level", "info", "debug, info, warn or error")
		showVer    = fs.Bool("version", false, "print the version and commit of this build and exit")
		eventWatch = fs.Bool("event-watch", true, "with --kubeconfig: watch the cluster's Kubernetes Events (restart-safe with --event-checkpoint-file)")
		eventAPI   = fs.String("event-api", "v1", `Events API to watch: "v1" or "events.k8s.io/v1"`)
		eventCkpt  = fs.String("event-checkpoint-file", "", "file keeping the Event watch's position across restarts (default: <data-dir>/event-checkpoint.json)")
		noDiff     = fs.Bool("diff-disable", false, "do not diff consecutive object versions from the audit stream")
		infDiff    = fs.Bool("diff-informer", true, "with --kubeconfig: also diff objects seen by informers, for writes whose audit event has no body (Metadata-level audit)")
		diffCache  = fs.Int("diff-cache-size", 0, "objects whose last version is kept for diffing (default 20,000)")
		kubeQPS    = fs.Float64("kube-qps", 0, "request rate limit of each cluster's client (default 50)")
		kubeBurst  = fs.Int("kube-burst", 0, "request burst of each cluster's client (default 100)")
		leaderEl   = fs.Bool("diff-leader-elect", false, "with several replicas: only the replica holding a Lease runs the informer diff source")
		leaseNS    = fs.String("diff-leader-elect-namespace", "", "namespace of the informer diff source's Lease (default kube-system)")
		leaseID    = fs.String("diff-leader-elect-identity", "", "this replica's identity in the Lease (default hostname_pid)")
		linkRules  = fs.String("link-rules", "", "directory of LinkRule YAML files (kelemetry.io/v1alpha1) to link objects by; reloaded when its files change")
		ruleWatch  = fs.Bool("link-rules-watch", true, "with --kubeconfig: also apply the LinkRule objects of the cluster (needs deploy/crds applied) and write their status")
		auditCert  = fs.String("audit-tls-cert", "", "PEM certificate of the audit webhook listener: serve HTTPS (reloaded when the file changes)")
		auditKey   = fs.String("audit-tls-key", "", "PEM key of --audit-tls-cert")
		auditCA    = fs.String("audit-client-ca", "", "PEM CA bundle: the webhook accepts clients with a certificate of these CAs (kube-apiserver's client-certificate); needs --audit-tls-cert")
		httpCert   = fs.String("http-tls-cert", "", "PEM certificate of the API listener: serve HTTPS (reloaded when the file changes)")
		httpKey    = fs.String("http-tls-key", "", "PEM key of --http-tls-cert")
		auditDump  = fs.String("audit-dump", "", "write every audit event the webhook accepts as a JSON line to FILE (rotated at audit.dump.maxBytes, readable by --replay)")
		proxyCA    = fs.String("http-proxy-client-ca", "", "PEM CA bundle of an authenticating proxy's client certificate: trust its X-Forwarded-User / X-Auth-Request-User / X-Remote-User header; needs --http-tls-cert")
		rlTimeout  = fs.Duration("remote-linker-timeout", 0, "with --remote-linker: how long to wait for a worker's links (default 5s; below the aggregator's link timeout, 10s)")
		rlCreds    = fs.String("remote-linker-nats-creds", "", "with --remote-linker: NATS credentials file (user JWT and NKey seed)")
		rlNKey     = fs.String("remote-linker-nats-nkey", "", "with --remote-linker: file of an NKey seed to authenticate to NATS")
		rlCA       = fs.String("remote-linker-nats-tls-ca", "", "with --remote-linker: PEM CA bundle that verifies the NATS servers")
		rlCert     = fs.String("remote-linker-nats-tls-cert", "", "with --remote-linker: PEM client certificate for NATS")
		rlKey      = fs.String("remote-linker-nats-tls-key", "", "PEM key of --remote-linker-nats-tls-cert")
	)
	kxConfigs := fs.StringArray("kelemetrix-config", nil, "kelemetrix metrics definitions (YAML, e.g. deploy/kelemetrix.yaml): metrics from every audit event, reads included, on /metrics; replaces the kelemetrix key of --config; repeatable (the metrics of every file, the other settings of the last file that sets them)")
	auditToks := fs.StringArray("audit-token-file", nil, "file of bearer tokens (one a line) the audit webhook accepts; repeatable")
	httpToks := fs.StringArray("http-token-file", nil, "file of bearer tokens (one a line) the API, the UI's API calls and /metrics accept; repeatable")
	proxyNames := fs.StringArray("http-proxy-allowed-name", nil, "common name of the authenticating proxy's client certificate (default: any of --http-proxy-client-ca); repeatable")
	replay := fs.StringArray("replay", nil, "audit log file (JSON lines, .gz ok) to ingest at start-up, then keep serving; repeatable")
	follow := fs.StringArray("follow", nil, "audit log file to follow like tail -F (survives rotation); repeatable")
	clusterKC := fs.StringArray("cluster-kubeconfig", nil, "another cluster as NAME=KUBECONFIG (its traces can be joined by link rules and parent-link annotations); repeatable")
	remoteLk := fs.StringArray("remote-linker", nil, "a linker served by other processes over NATS (examples/linkerworker), as NAME or NAME=SUBJECT (default subject kelemetry.link.NAME); needs --remote-linker-nats-url; repeatable")
	rlURLs := fs.StringArray("remote-linker-nats-url", nil, "NATS server of the remote linkers (nats://host:4222, tls://...); repeatable")
	replayTr := fs.StringArray("replay-apiserver-traces", nil, "recorded kube-apiserver request spans (OTLP/JSON lines, as apiserverTraces.dump writes them) to join at start-up; implies --apiserver-traces; repeatable")
	replayEv := fs.StringArray("replay-events", nil, "recorded Kubernetes Events (a v1 or events.k8s.io/v1 EventList JSON file) to ingest at start-up; repeatable")
	sets := fs.StringArray("set", nil, "override one key of the configuration, KEY.PATH=VALUE with a YAML value (--set store.maxBytes=20Gi, --set window=1h), after the file and the other flags; repeatable")
	forward := fs.StringArray("audit-forward", nil, "also post every batch the webhook accepts to this audit webhook URL ({cluster} in it is the batch's cluster), with retries and a bounded buffer; repeatable")
	build = func(validate bool) (kelemetry.Config, slog.Level, error) {
		if fs.NArg() > 0 {
			return kelemetry.Config{}, 0, fmt.Errorf("unexpected arguments %q: every setting is a --flag (kelemetry --help lists them)", fs.Args())
		}
		if *showVer {
			return kelemetry.Config{}, 0, errShowVersion
		}
		var level slog.Level
		if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
			return kelemetry.Config{}, 0, fmt.Errorf("--log-level: %w", err)
		}

		cfg := kelemetry.Config{DataDir: "./kelemetry-data"}
		if *configFile != "" {
			var err error
			if cfg, err = kelemetry.LoadConfig(*configFile); err != nil {
				return kelemetry.Config{}, 0, err
			}
		}
		set := map[string]bool{}
		fs.VisitAll(func(f *pflag.Flag) { set[f.Name] = f.Changed })
		override := func(name string, apply func()) {
			if set[name] || *configFile == "" {
				apply()
			}
		}
		override("cluster", func() { cfg.Cluster = *cluster })
		override("audit-addr", func() { cfg.AuditAddr = *auditAddr })
		override("http-addr", func() { cfg.HTTPAddr = *httpAddr })
		override("data-dir", func() { cfg.DataDir = *dataDir })
		override("audit-tls-cert", func() { cfg.AuditTLS.CertFile = *auditCert })
		override("audit-tls-key", func() { cfg.AuditTLS.KeyFile = *auditKey })
		override("audit-client-ca", func() { cfg.AuditAuth.ClientCAFile = *auditCA })
		override("http-tls-cert", func() { cfg.HTTPTLS.CertFile = *httpCert })
		override("http-tls-key", func() { cfg.HTTPTLS.KeyFile = *httpKey })
		override("http-proxy-client-ca", func() { cfg.HTTPAuth.Proxy.ClientCAFile = *proxyCA })
		cfg.AuditAuth.TokenFiles = append(cfg.AuditAuth.TokenFiles, *auditToks...)
		cfg.HTTPAuth.TokenFiles = append(cfg.HTTPAuth.TokenFiles, *httpToks...)
		cfg.HTTPAuth.Proxy.AllowedNames = append(cfg.HTTPAuth.Proxy.AllowedNames, *proxyNames...)
		override("window", func() {
			if *window != 0 {
				cfg.Window = *window
			}
		})
		override("kubeconfig", func() { cfg.Kubeconfig = *kubeconfig })
		override("otlp-endpoint", func() { cfg.OTLP.Endpoint = *otlp })
		override("remote-storage-addr", func() { cfg.RemoteStorageAddr = *remoteStor })
		override("otlp-addr", func() { cfg.OTLPAddr = *otlpAddr })
		override("apiserver-traces", func() { cfg.APIServerTraces.Enabled = *apiTraces })
		override("role", func() { cfg.Role = *role })
		override("memory-limit", func() { cfg.MemoryLimit = *memLimit })
		override("store-backend", func() { cfg.StoreBackend = *storeBack })
		override("jaeger-endpoint", func() { cfg.Jaeger.Endpoint = *jaegerEP })
		override("jaeger-otlp-endpoint", func() { cfg.Jaeger.OTLP.Endpoint = *jaegerOTLP })
		override("event-api", func() { cfg.Event.Source.API = *eventAPI })
		override("event-checkpoint-file", func() { cfg.Event.Source.CheckpointFile = *eventCkpt })
		if set["audit-queue-durable"] {
			v := *durableQ
			cfg.Audit.Queue.Durable = &v
		}
		if set["audit-queue-nats"] {
			cfg.Audit.Queue.NATS.URLs = nil
			for _, u := range strings.Split(*natsURLs, ",") {
				if u = strings.TrimSpace(u); u != "" {
					cfg.Audit.Queue.NATS.URLs = append(cfg.Audit.Queue.NATS.URLs, u)
				}
			}
		}
		if set["audit-queue-nats-creds"] {
			cfg.Audit.Queue.NATS.CredentialsFile = *natsCreds
		}
		if set["audit-queue-nats-member"] {
			i, n, err := parseMember(*natsMember)
			if err != nil {
				return kelemetry.Config{}, 0, fmt.Errorf("--audit-queue-nats-member: %w", err)
			}
			cfg.Audit.Queue.NATS.Member, cfg.Audit.Queue.NATS.Members = i, n
		}
		override("diff-disable", func() { cfg.Audit.Consumer.Diff.Disabled = *noDiff })
		override("diff-cache-size", func() { cfg.Audit.Consumer.Diff.CacheSize = *diffCache })
		override("link-rules", func() { cfg.LinkRules.Dir = *linkRules })
		override("link-rules-watch", func() { cfg.LinkRules.DisableWatch = !*ruleWatch })
		for _, kv := range *clusterKC {
			name, path, ok := strings.Cut(kv, "=")
			if !ok || name == "" || path == "" {
				return kelemetry.Config{}, 0, fmt.Errorf("--cluster-kubeconfig %q: want NAME=KUBECONFIG", kv)
			}
			cfg.Clusters = append(cfg.Clusters, kube.ClusterConfig{Name: name, Kubeconfig: path})
		}
		for i := range cfg.Clusters {
			if set["kube-qps"] {
				cfg.Clusters[i].QPS = float32(*kubeQPS)
			}
			if set["kube-burst"] {
				cfg.Clusters[i].Burst = *kubeBurst
			}
		}
		if cfg.Kubeconfig != "" && (set["kube-qps"] || set["kube-burst"]) {
			// The primary cluster's kubeconfig becomes an entry of Clusters so that it takes limits.
			cfg.Clusters = append([]kube.ClusterConfig{{Name: cfg.WithDefaults().Cluster, Kubeconfig: cfg.Kubeconfig,
				QPS: float32(*kubeQPS), Burst: *kubeBurst}}, cfg.Clusters...)
			cfg.Kubeconfig = ""
		}
		if main := cfg.WithDefaults().Cluster; cfg.HasCluster(main) {
			override("event-watch", func() { cfg.Event.Watch = *eventWatch })
			if cfg.Event.Watch && *configFile == "" {
				// Every cluster's Events, each with its own checkpoint.
				for _, cc := range cfg.KubeClusters() {
					if cc.Name != main {
						cfg.Event.WatchClusters = append(cfg.Event.WatchClusters, cc.Name)
					}
				}
			}
		}
		if len(cfg.KubeClusters()) > 0 {
			override("diff-informer", func() { cfg.InformerDiff.Enabled = *infDiff })
			override("diff-leader-elect", func() { cfg.InformerDiff.LeaderElection.Enabled = *leaderEl })
			override("diff-leader-elect-namespace", func() { cfg.InformerDiff.LeaderElection.LeaseNamespace = *leaseNS })
			override("diff-leader-elect-identity", func() { cfg.InformerDiff.LeaderElection.Identity = *leaseID })
		}
		if cfg.Event.Watch && cfg.Event.Source.CheckpointFile == "" && cfg.Event.Source.CheckpointConfigMap == "" && cfg.DataDir != "" {
			cfg.Event.Source.CheckpointFile = filepath.Join(cfg.DataDir, "event-checkpoint.json")
		}
		for _, spec := range *remoteLk {
			name, subject, _ := strings.Cut(spec, "=")
			cfg.RemoteLinkers.Linkers = append(cfg.RemoteLinkers.Linkers, remotelinker.LinkerConfig{Name: name, Subject: subject})
		}
		for i := range cfg.RemoteLinkers.Linkers {
			if set["remote-linker-timeout"] {
				cfg.RemoteLinkers.Linkers[i].Timeout = *rlTimeout
			}
		}
		cfg.RemoteLinkers.NATS.URLs = append(cfg.RemoteLinkers.NATS.URLs, *rlURLs...)
		override("remote-linker-nats-creds", func() { cfg.RemoteLinkers.NATS.CredentialsFile = *rlCreds })
		override("remote-linker-nats-nkey", func() { cfg.RemoteLinkers.NATS.NKeySeedFile = *rlNKey })
		override("remote-linker-nats-tls-ca", func() { cfg.RemoteLinkers.NATS.TLS.CAFile = *rlCA })
		override("remote-linker-nats-tls-cert", func() { cfg.RemoteLinkers.NATS.TLS.CertFile = *rlCert })
		override("remote-linker-nats-tls-key", func() { cfg.RemoteLinkers.NATS.TLS.KeyFile = *rlKey })
		if len(*kxConfigs) > 0 {
			var merged kelemetrix.Config
			for _, file := range *kxConfigs {
				kx, err := kelemetrix.LoadConfig(file)
				if err != nil {
					return kelemetry.Config{}, 0, fmt.Errorf("--kelemetrix-config: %w", err)
				}
				merged = merged.Merge(kx)
			}
			cfg.Kelemetrix = merged
		}
		cfg.Event.Replay = append(cfg.Event.Replay, *replayEv...)
		cfg.APIServerTraces.Replay = append(cfg.APIServerTraces.Replay, *replayTr...)
		if len(*replayTr) > 0 {
			cfg.APIServerTraces.Enabled = true
		}
		cfg.Audit.Replay = append(cfg.Audit.Replay, *replay...)
		cfg.Audit.Follow = append(cfg.Audit.Follow, *follow...)
		override("audit-dump", func() { cfg.Audit.Dump.Path = *auditDump })
		for _, u := range *forward {
			cfg.Audit.Forward = append(cfg.Audit.Forward, tap.ForwardConfig{URL: u})
		}
		if len(*sets) > 0 {
			if err := configfile.Decode(nil, &cfg, configfile.Options{Sets: *sets, Moved: configfile.Moved}); err != nil {
				return kelemetry.Config{}, 0, err
			}
		}
		if validate {
			if err := cfg.Validate(); err != nil {
				return kelemetry.Config{}, 0, err
			}
		}
		return cfg, level, nil
	}
	annotateSections(fs)
	return fs, build
}

// sectionAnnotation is the pflag annotation naming a flag's section of the help.
const sectionAnnotation = "kelemetry.section"

// sections group the flags in the help by topic, as kube-apiserver's help does.
var sections = []struct {
	name  string
	flags []string
}{
	{"General", []string{"config", "set", "cluster", "data-dir", "window", "role", "memory-limit", "log-level", "version"}},
	{"Listeners", []string{"audit-addr", "http-addr", "otlp-addr", "remote-storage-addr", "pprof-addr"}},
	{"Security", []string{"audit-tls-cert", "audit-tls-key", "audit-client-ca", "audit-token-file", "http-tls-cert", "http-tls-key", "http-token-file", "http-proxy-client-ca", "http-proxy-allowed-name"}},
	{"Audit", []string{"replay", "follow", "audit-queue-durable", "audit-queue-nats", "audit-queue-nats-creds", "audit-queue-nats-member", "audit-dump", "audit-forward", "apiserver-traces", "replay-apiserver-traces"}},
	{"Store", []string{"store-backend", "jaeger-endpoint", "jaeger-otlp-endpoint", "otlp-endpoint"}},
	{"Clusters and Events", []string{"kubeconfig", "cluster-kubeconfig", "kube-qps", "kube-burst", "event-watch", "event-api", "event-checkpoint-file", "replay-events"}},
	{"Diffs", []string{"diff-disable", "diff-cache-size", "diff-informer", "diff-leader-elect", "diff-leader-elect-namespace", "diff-leader-elect-identity"}},
	{"Linkers", []string{"link-rules", "link-rules-watch", "remote-linker", "remote-linker-timeout", "remote-linker-nats-url", "remote-linker-nats-creds", "remote-linker-nats-nkey", "remote-linker-nats-tls-ca", "remote-linker-nats-tls-cert", "remote-linker-nats-tls-key"}},
	{"Telemetry", []string{"kelemetrix-config"}},
	{"Replay", []string{"to", "to-token-file", "to-ca-file", "batch-events", "progress-every"}},
}

// annotateSections marks each flag of fs with its section.
func annotateSections(fs *pflag.FlagSet) {
	for _, sec := range sections {
		for _, name := range sec.flags {
			if fs.Lookup(name) != nil {
				_ = fs.SetAnnotation(name, sectionAnnotation, []string{sec.name})
			}
		}
	}
}

package kelemetry

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"

	"go.opentelemetry.io/otel/metric"
	"go.uber.org/fx"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit"
	"github.com/kelemetry/kelemetry/diff/changes"
	"github.com/kelemetry/kelemetry/diff/informer"
	"github.com/kelemetry/kelemetry/event"
	"github.com/kelemetry/kelemetry/frontend"
	"github.com/kelemetry/kelemetry/frontend/ui"
	"github.com/kelemetry/kelemetry/httpserver"
	"github.com/kelemetry/kelemetry/linker"
	"github.com/kelemetry/kelemetry/linkrule"
	"github.com/kelemetry/kelemetry/otlpsink"
	"github.com/kelemetry/kelemetry/store"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Module is the whole built-in application. It needs a Config (fx.Supply) and takes an optional
// *slog.Logger. It provides the metric.MeterProvider (Prometheus, served at /metrics), the store
// (store.Store and store.Reader), and *Servers.
var Module = fx.Module("kelemetry",
	fx.Provide(
		subConfigs,
		newMetrics,
		newTelemetry,
		newStore,
		newOTLPSink,
		newClusters,
		newServers,
	),
	aggregator.Module,
	audit.Module,
	event.Module,
	linker.Module,
	linkrule.Module,
	informer.Module,
	fx.Invoke(func(*Servers) {}),
	fx.Invoke(joinInformerDiffs),
)

// joinInformerDiffs lets the audit consumer attach informer diffs to events that carry no
// response body, from this process's change cache or, with the etcd backend, from the records
// the leading replica wrote to etcd. The consumer's hooks come after the queue's, so it stops
// first; events handled after that are looked up once and never held.
func joinInformerDiffs(c *audit.Consumer, records changes.Store, lc fx.Lifecycle) {
	if records == nil {
		return
	}
	c.SetInformerDiffs(records)
	lc.Append(fx.StartStopHook(c.Start, c.Stop))
}

type subConfigsOut struct {
	fx.Out

	Aggregator   aggregator.Config
	Audit        audit.Config
	Event        event.Config
	Linker       linker.Config
	InformerDiff informer.ModuleConfig
	LinkRules    linkrule.Config
}

func subConfigs(c Config) (subConfigsOut, error) {
	if err := c.Validate(); err != nil {
		return subConfigsOut{}, fmt.Errorf("kelemetry config: %w", err)
	}
	c = c.WithDefaults()
	return subConfigsOut{Aggregator: c.Aggregator, Audit: c.Audit, Event: c.Event, Linker: c.Linker, InformerDiff: c.InformerDiff, LinkRules: c.LinkRules}, nil
}

func newMetrics(lc fx.Lifecycle) (*telemetry.Prometheus, metric.MeterProvider, error) {
	m, err := telemetry.NewPrometheus()
	if err != nil {
		return nil, nil, err
	}
	lc.Append(fx.StopHook(m.Shutdown))
	return m, m.Provider, nil
}

// newTelemetry gives the modules that take telemetry.Settings (audit, the informer diff source)
// the application's logger and meter provider.
func newTelemetry(l optionalLogger, mp metric.MeterProvider) telemetry.Settings {
	return telemetry.Settings{Logger: l.get(), MeterProvider: mp}
}

type storeOut struct {
	fx.Out

	Store  store.Store
	Reader store.Reader
	Sink   aggregator.Sink `group:"kelemetry.sinks"`
}

type optionalLogger struct {
	fx.In

	Logger *slog.Logger `optional:"true"`
}

func (o optionalLogger) get() *slog.Logger {
	if o.Logger == nil {
		return slog.Default()
	}
	return o.Logger
}

func newStore(c Config, l optionalLogger, mp metric.MeterProvider, lc fx.Lifecycle) (storeOut, error) {
	c = c.WithDefaults()
	if c.DataDir == "" {
		m := store.NewMemory(c.Memory)
		return storeOut{Store: m, Reader: m, Sink: m}, nil
	}
	p, err := store.OpenPebble(context.Background(), c.Store, l.get(), mp)
	if err != nil {
		return storeOut{}, err
	}
	lc.Append(fx.StartStopHook(p.Start, func(ctx context.Context) error {
		return joinErr(p.Stop(ctx), p.Close())
	}))
	return storeOut{Store: p, Reader: p, Sink: p}, nil
}

func joinErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

type sinksOut struct {
	fx.Out

	Sinks []aggregator.Sink `group:"kelemetry.sinks,flatten"`
}

func newOTLPSink(c Config, l optionalLogger, mp metric.MeterProvider, lc fx.Lifecycle) (sinksOut, error) {
	if c.OTLP.Endpoint == "" {
		return sinksOut{}, nil
	}
	s, err := otlpsink.New(context.Background(), c.OTLP, l.get(), mp)
	if err != nil {
		return sinksOut{}, err
	}
	lc.Append(fx.StartStopHook(s.Start, s.Stop))
	return sinksOut{Sinks: []aggregator.Sink{s}}, nil
}

type clustersOut struct {
	fx.Out

	// Clusters is a nil interface without a kubeconfig.
	Clusters linker.Clusters
}

// newClusters builds Kubernetes clients for the configured clusters (Config.Kubeconfig and
// Config.Clusters); linkers use them to fetch objects the audit stream did not carry and to
// resolve targets in other clusters, the Event and informer sources to watch.
func newClusters(c Config) (clustersOut, error) {
	ccs := c.KubeClusters()
	if len(ccs) == 0 {
		return clustersOut{}, nil
	}
	configs := make(map[string]*rest.Config, len(ccs))
	for _, cc := range ccs {
		rc, err := restConfig(cc)
		if err != nil {
			return clustersOut{}, err
		}
		configs[cc.Name] = rc
	}
	return clustersOut{Clusters: linker.NewKubeClusters(configs)}, nil
}

func restConfig(cc ClusterConfig) (*rest.Config, error) {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: cc.Kubeconfig}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: cc.Context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("cluster %s: kubeconfig %s: %w", cc.Name, cc.Kubeconfig, err)
	}
	rc.UserAgent = "kelemetry"
	rc.QPS, rc.Burst = cc.QPS, cc.Burst
	return rc, nil
}

// Servers are the application's HTTP listeners.
type Servers struct {
	audit *httpserver.Server
	api   *httpserver.Server
}

// AuditAddr is the bound address of the audit webhook server.
func (s *Servers) AuditAddr() string { return s.audit.Addr() }

// HTTPAddr is the bound address of the API server.
func (s *Servers) HTTPAddr() string { return s.api.Addr() }

type serversIn struct {
	fx.In

	Config   Config
	Logger   *slog.Logger `optional:"true"`
	Metrics  *telemetry.Prometheus
	Reader   store.Reader
	Webhook  *audit.Webhook
	Replayer *audit.Replayer
	Events   *event.Replayer
	Queue    *audit.Queue
	LC       fx.Lifecycle
}

func newServers(in serversIn) *Servers {
	c := in.Config.WithDefaults()
	logger := optionalLogger{Logger: in.Logger}.get()
	health := healthHandler(in.Replayer, in.Events, in.Queue)

	auditMux := http.NewServeMux()
	in.Webhook.Register(auditMux)
	auditMux.Handle("GET /healthz", health)

	apiMux := http.NewServeMux()
	frontend.NewNativeAPI(in.Reader, logger).Register(apiMux)
	frontend.NewJaegerAPI(in.Reader, frontend.EngineConfig{Window: c.Aggregator.Window}, logger).Register(apiMux)
	frontend.NewUIAPI(in.Reader, frontend.EngineConfig{Window: c.Aggregator.Window}, logger).Register(apiMux)
	ui.Register(apiMux)
	apiMux.Handle("GET /metrics", in.Metrics.Handler)
	apiMux.Handle("GET /healthz", health)

	s := &Servers{
		audit: httpserver.NewServer("audit", c.AuditAddr, auditMux, logger),
		api:   httpserver.NewServer("api", c.HTTPAddr, apiMux, logger),
	}
	if c.AuditAddr == c.HTTPAddr {
		// One listener serves both.
		for pattern, h := range map[string]http.Handler{"POST /audit": auditMux, "POST /audit/{cluster}": auditMux} {
			apiMux.Handle(pattern, h)
		}
		s.audit = s.api
		in.LC.Append(fx.StartStopHook(s.api.Start, s.api.Stop))
		return s
	}
	in.LC.Append(fx.StartStopHook(s.audit.Start, s.audit.Stop))
	in.LC.Append(fx.StartStopHook(s.api.Start, s.api.Stop))
	return s
}

// Health is the body of GET /healthz.
type Health struct {
	Status     string       `json:"status"`
	QueueDepth int          `json:"queueDepth"`
	Replay     HealthReplay `json:"replay"`
}

// HealthReplay reports the start-up replay.
type HealthReplay struct {
	Done  bool                `json:"done"`
	Files []audit.ReplayStats `json:"files"`
	Error string              `json:"error,omitempty"`
}

func healthHandler(r *audit.Replayer, ev *event.Replayer, q *audit.Queue) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h := Health{Status: "ok", QueueDepth: q.Len()}
		select {
		case <-r.Done():
			select {
			case <-ev.Done():
				h.Replay.Done = true
			default:
			}
		default:
		}
		stats, err := r.Status()
		h.Replay.Files = stats
		if err != nil {
			h.Replay.Error = err.Error()
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(h)
	})
}

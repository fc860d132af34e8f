package kelemetry

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"

	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit"
	"github.com/kelemetry/kelemetry/audit/apitrace"
	"github.com/kelemetry/kelemetry/audit/auditlog"
	"github.com/kelemetry/kelemetry/audit/queue"
	"github.com/kelemetry/kelemetry/diff/informer"
	"github.com/kelemetry/kelemetry/event"
	"github.com/kelemetry/kelemetry/frontend"
	"github.com/kelemetry/kelemetry/frontend/ui"
	"github.com/kelemetry/kelemetry/health"
	"github.com/kelemetry/kelemetry/httpserver"
	"github.com/kelemetry/kelemetry/internal/healthz"
	"github.com/kelemetry/kelemetry/internal/version"
	"github.com/kelemetry/kelemetry/kelemetrix"
	"github.com/kelemetry/kelemetry/kube"
	"github.com/kelemetry/kelemetry/linker"
	"github.com/kelemetry/kelemetry/linkrule"
	"github.com/kelemetry/kelemetry/otlpsink"
	"github.com/kelemetry/kelemetry/remotelinker"
	"github.com/kelemetry/kelemetry/storageapi"
	"github.com/kelemetry/kelemetry/store"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Module is the whole built-in application, a bundle of the parts' own modules plus the fan-out
// of Config into their configurations. It needs a Config (fx.Supply) and takes an optional
// *slog.Logger and an optional metric.MeterProvider (without one, a Prometheus provider is served
// at /metrics).
//
// Every part can be replaced with fx's own means: fx.Replace(aggregator.Config{...}) or
// fx.Decorate for a part's configuration; fx.Supply a metric.MeterProvider; or compose the parts
// (telemetry.Module, httpserver.Module, store.Module, aggregator.Module, audit.Module, ...)
// without this bundle to leave some out (see docs/sdk/compose.md).
var Module = Modules(RoleAll)

// Modules is Module for one role: RoleAll (or "") is Module (kelemetrix, the metrics of the
// audit stream, is part of the ingest side: it records nothing unless Config.Kelemetrix defines
// metrics); roleIngest leaves out the query
// side (the Jaeger and native APIs, the web UI, the storage API), so the API listener serves only
// /metrics and /healthz; roleQuery leaves out the ingest side (the webhook, replays, Event
// watches, linkers, the aggregator), so no webhook port is opened and the store is only read.
// Replicas of each role share a store through the jaeger backend (package store/jaeger).
func Modules(role string) fx.Option {
	common := []fx.Option{fx.Provide(subConfigs), telemetry.Module, httpserver.Module, store.Module}
	ingest := []fx.Option{
		fx.Provide(fx.Annotate(newHealth, fx.ParamTags(``, ``, ``, ``, health.ReadyGroup))),
		kube.Module,
		otlpsink.Module,
		aggregator.Module,
		audit.Module,
		apitrace.Module,
		kelemetrix.Module,
		event.Module,
		linker.Module,
		linkrule.Module,
		remotelinker.Module,
		informer.Module,
	}
	query := []fx.Option{frontend.Module, ui.Module, storageapi.Module}
	opts := common
	switch role {
	case RoleIngest:
		opts = append(opts, ingest...)
	case RoleQuery:
		opts = append(opts, query...)
	default:
		opts = append(append(opts, ingest...), query...)
	}
	opts = append(opts, fx.WithLogger(newFxLogger))
	return fx.Module("kelemetry", opts...)
}

// fxLoggerParams takes the application's logger when it supplies one.
type fxLoggerParams struct {
	fx.In
	Logger *slog.Logger `optional:"true"`
}

// newFxLogger sends fx's events about the bundle's parts (what each provides and invokes, and
// their errors) to the application's slog logger (slog.Default() without one), at debug level:
// an application built on Module prints no fx wiring lines unless it logs at debug, and the
// error that stops a start is what fx.New(...).Err() and Run return.
func newFxLogger(p fxLoggerParams) fxevent.Logger {
	logger := p.Logger
	if logger == nil {
		logger = slog.Default()
	}
	l := &fxevent.SlogLogger{Logger: logger.With("component", "fx")}
	l.UseLogLevel(slog.LevelDebug)
	l.UseErrorLevel(slog.LevelDebug)
	return l
}

// configs is the fan-out of Config: one configuration per part, and the values they share.
type configs struct {
	fx.Out

	Window       aggregator.Window
	HTTP         httpserver.Config
	Store        store.Config
	OTLP         otlpsink.Config
	Aggregator   aggregator.Config
	Audit        audit.Config
	Event        event.Config
	Linker       linker.Config
	Kube         kube.Config
	InformerDiff informer.ModuleConfig
	LinkRules    linkrule.Config
	Remote       remotelinker.Config
	Query        frontend.Config
	StorageAPI   storageapi.Config
	Kelemetrix   kelemetrix.Config
	APITraces    apitrace.Config
}

func subConfigs(c Config) (configs, error) {
	if err := c.Validate(); err != nil {
		return configs{}, fmt.Errorf("kelemetry config: %w", err)
	}
	c = c.WithDefaults()
	return configs{
		Window:       aggregator.Window(c.Window),
		HTTP:         c.http(),
		Store:        c.storeConfig(),
		OTLP:         c.OTLP,
		Aggregator:   c.Aggregator,
		Audit:        c.Audit,
		Event:        c.Event,
		Linker:       c.Linker,
		Kube:         c.kube(),
		InformerDiff: c.InformerDiff,
		LinkRules:    c.LinkRules,
		Remote:       c.RemoteLinkers,
		Query:        c.Query,
		StorageAPI:   c.RemoteStorage(),
		Kelemetrix:   c.Kelemetrix,
		APITraces:    c.APIServerTraces,
	}, nil
}

// newHealth answers GET /healthz on both listeners: the audit queue's depth, the progress of
// the start-up replays, and whether the sinks take writes and the NATS queue is connected (503
// "unavailable" when not, e.g. the store's disk is full or NATS is out of reach).
func newHealth(r *auditlog.Replayer, ev *event.Replayer, q queue.Queue, agg *aggregator.Engine, checks []health.Check) httpserver.Health {
	return healthHandler(func() healthz.Body {
		build := version.Get()
		// The queue's depth first: once it is 0, every handled event's link job is counted.
		h := healthz.Body{Status: "ok", QueueDepth: q.Len(), Version: build.Version, Commit: build.Commit}
		h.LinkJobs = agg.LinkJobs()
		select {
		case <-r.Done():
			select {
			case <-ev.Done():
				h.Replay.Done = true
			default:
			}
		default:
		}
		files, err := r.Status()
		h.Replay.Files = make([]healthz.ReplayFile, 0, len(files))
		for _, f := range files {
			rf := healthz.ReplayFile{File: f.File, Done: f.Done, BytesRead: f.BytesRead, BytesTotal: f.BytesTotal,
				Lines: f.Stats.Lines, Events: f.Stats.Events, BadLines: f.Stats.BadLines, DroppedEvents: f.Stats.DroppedEvents}
			if s := f.Elapsed.Seconds(); s > 0 {
				rf.EventsPerSecond = float64(f.Stats.Events) / s
			}
			h.Replay.Files = append(h.Replay.Files, rf)
		}
		if err != nil {
			h.Replay.Error = err.Error()
		}
		if kind := q.Kind(); kind != "memory" {
			fine := "ok"
			if kind == "nats" {
				fine = "connected"
			}
			h.Queue = kind + ": " + fine
			if err := q.Health(context.Background()); err != nil {
				h.Queue = kind + ": " + err.Error()
			}
		}
		return h
	}, readiness(checks, agg.SinkHealth))
}

// readiness is what /healthz's status follows: the readiness checks the parts registered (package
// health; GET /readyz lists them by name) and, when they all pass, the sinks' back-pressure,
// which keeps the process ready but is reported as busy.
func readiness(checks []health.Check, sinkHealth func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := health.Failed(health.Run(ctx, checks)); err != nil {
			return err
		}
		if err := sinkHealth(ctx); aggregator.OnlyBusy(err) {
			return err
		}
		return nil
	}
}

// healthHandler serves status, turned "unavailable" (HTTP 503) with the reason while sinkHealth
// fails, or "busy" (still 200) while the sinks are only back-pressured.
func healthHandler(status func() healthz.Body, sinkHealth func(context.Context) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		h := status()
		code := http.StatusOK
		switch err := sinkHealth(req.Context()); {
		case err == nil:
		case aggregator.OnlyBusy(err):
			// Back-pressure (a slow OTLP receiver) passes: the webhook answers 429 meanwhile, and
			// restarting or unrouting the process would not help.
			h.Status, h.Reason = "busy", err.Error()
		default:
			h.Status, h.Reason, code = "unavailable", err.Error(), http.StatusServiceUnavailable
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(h)
	})
}

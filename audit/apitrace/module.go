package apitrace

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.uber.org/fx"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/httpserver"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Exporter writes the joined spans: the aggregator's Engine (ExportSpans).
type Exporter interface {
	ExportSpans(ctx context.Context, spans []*aggregator.Span) error
}

// Join is the join of kube-apiserver's request traces, built by New. Give its Decorator to the
// aggregator (it sees the audit event spans), SetExporter it the aggregator's Engine, serve its
// Handler on the OTLP listener (httpserver.Deps.OTLP), and Start it once the aggregator runs.
type Join struct {
	j      *joiner
	recv   *receiver
	dump   *dumper
	replay []string

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// New builds the join of cfg (nil when cfg is off).
func New(cfg Config, tel telemetry.Settings) (*Join, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.Enabled {
		return nil, nil
	}
	cfg = cfg.WithDefaults()
	j := newJoiner(cfg, tel)
	d, err := newDumper(cfg.Dump, cfg.DumpMaxBytes, j.log)
	if err != nil {
		return nil, err
	}
	return &Join{j: j, recv: newReceiver(j, d), dump: d, replay: cfg.Replay}, nil
}

// Decorator is the aggregator.Decorator that sees the audit event spans (it changes none).
func (s *Join) Decorator() aggregator.Decorator { return s.j }

// Handler serves the OTLP routes (POST /v1/traces, OTLP/gRPC's TraceService/Export).
func (s *Join) Handler() httpserver.Handler { return s.recv }

// SetExporter makes the join write through e (the aggregator's Engine). Call it before Start.
func (s *Join) SetExporter(e Exporter) { s.j.setExporter(e) }

// Start starts the writer and the expiry and, in the background, the replay of Config.Replay.
func (s *Join) Start(context.Context) error {
	s.j.start()
	rctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s.mu.Lock()
	s.cancel, s.done = cancel, done
	s.mu.Unlock()
	go func() {
		defer close(done)
		if len(s.replay) == 0 {
			return
		}
		n, err := replay(rctx, s.j, s.replay...)
		if err != nil && !errors.Is(err, context.Canceled) {
			s.j.log.Error("replaying recorded request spans failed", "error", err, "spans", n)
			return
		}
		s.j.log.Info("replayed recorded request spans", "spans", n, "files", len(s.replay))
	}()
	return nil
}

// Flush returns once the replay of Config.Replay is done and what was joined so far is written
// (or ctx ends).
func (s *Join) Flush(ctx context.Context) error {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.j.flush(ctx)
	return ctx.Err()
}

// Stop ends the replay, then the writer (writing what is queued); it is safe without Start.
func (s *Join) Stop(ctx context.Context) error {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	return errors.Join(s.j.stop(ctx), s.dump.close())
}

// moduleParams are the fx inputs of newModule.
type moduleParams struct {
	fx.In

	Config    Config             `optional:"true"`
	Telemetry telemetry.Settings `optional:"true"`
}

// moduleResult are the join's Decorator and OTLP Handler, both absent when the join is off.
type moduleResult struct {
	fx.Out

	Join       *Join
	Decorators []aggregator.Decorator `group:"kelemetry.decorators,flatten"`
	Handlers   []httpserver.Handler   `group:"kelemetry.http.otlp,flatten"`
}

func newModule(p moduleParams) (moduleResult, error) {
	s, err := New(p.Config, p.Telemetry)
	if err != nil {
		return moduleResult{}, fmt.Errorf("apiserver traces: %w", err)
	}
	if s == nil {
		return moduleResult{}, nil
	}
	return moduleResult{Join: s, Decorators: []aggregator.Decorator{s.Decorator()}, Handlers: []httpserver.Handler{s.Handler()}}, nil
}

// engineParams are what the join writes through.
type engineParams struct {
	fx.In

	Join      *Join              `optional:"true"`
	Engine    *aggregator.Engine `optional:"true"`
	Lifecycle fx.Lifecycle
}

// Module joins kube-apiserver's request traces to audit events when Config.Enabled: the join
// decorates the aggregator's spans, writes through its Engine, and receives on the OTLP listener
// (httpserver.Config.OTLPAddr). It starts after the aggregator and its sinks (its replay writes
// through them) and stops before them.
var Module = fx.Module("apitrace",
	fx.Provide(newModule),
	fx.Invoke(func(p engineParams) {
		if p.Join == nil {
			return
		}
		if p.Engine != nil {
			p.Join.SetExporter(p.Engine)
		}
		p.Lifecycle.Append(fx.StartStopHook(p.Join.Start, p.Join.Stop))
	}),
)

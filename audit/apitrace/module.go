package apitrace

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/fx"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/httpserver"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Join is a Joiner with its Receiver, built by New.
type Join struct {
	Joiner   *Joiner
	Receiver *Receiver
	dump     *dumper
	replay   []string
	cancel   context.CancelFunc
	done     chan struct{}
}

// New builds the join of cfg (nil when cfg is off). Give the Joiner to the aggregator as a
// Decorator, SetExporter it the aggregator's Engine, serve the Receiver on the OTLP listener,
// and Start the Join once the aggregator runs.
func New(cfg Config, tel telemetry.Settings) (*Join, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.Enabled {
		return nil, nil
	}
	cfg = cfg.WithDefaults()
	j := NewJoiner(cfg, tel)
	d, err := newDumper(cfg.Dump, cfg.DumpMaxBytes, j.log)
	if err != nil {
		return nil, err
	}
	return &Join{Joiner: j, Receiver: NewReceiver(j, d), dump: d, replay: cfg.Replay}, nil
}

// Start starts the Joiner and, in the background, the replay of Config.Replay.
func (s *Join) Start(ctx context.Context) error {
	if err := s.Joiner.Start(ctx); err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan struct{})
	go func() {
		defer close(s.done)
		if len(s.replay) == 0 {
			return
		}
		n, err := Replay(rctx, s.Joiner, s.replay...)
		if err != nil && !errors.Is(err, context.Canceled) {
			s.Joiner.log.Error("replaying recorded request spans failed", "error", err, "spans", n)
			return
		}
		s.Joiner.log.Info("replayed recorded request spans", "spans", n, "files", len(s.replay))
	}()
	return nil
}

// Stop ends the replay, then the Joiner; it is safe without Start.
func (s *Join) Stop(ctx context.Context) error {
	if s.cancel != nil {
		s.cancel()
		<-s.done
	}
	return errors.Join(s.Joiner.Stop(ctx), s.dump.close())
}

// moduleParams are the fx inputs of newModule.
type moduleParams struct {
	fx.In

	Config    Config             `optional:"true"`
	Telemetry telemetry.Settings `optional:"true"`
}

// moduleResult are the Joiner as a Decorator and the Receiver as an OTLP handler, both absent
// when the join is off.
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
	return moduleResult{Join: s, Decorators: []aggregator.Decorator{s.Joiner}, Handlers: []httpserver.Handler{s.Receiver}}, nil
}

// engineParams are what the join writes through.
type engineParams struct {
	fx.In

	Join      *Join              `optional:"true"`
	Engine    *aggregator.Engine `optional:"true"`
	Lifecycle fx.Lifecycle
}

// Module joins kube-apiserver's request traces to audit events when Config.Enabled: the Joiner
// decorates the aggregator's spans, writes through its Engine, and the Receiver serves on the
// OTLP listener (httpserver.Config.OTLPAddr). It starts after the aggregator and its sinks (its
// replay writes through them) and stops before them.
var Module = fx.Module("apitrace",
	fx.Provide(newModule),
	fx.Invoke(func(p engineParams) {
		if p.Join == nil {
			return
		}
		if p.Engine != nil {
			p.Join.Joiner.SetExporter(p.Engine)
		}
		p.Lifecycle.Append(fx.StartStopHook(p.Join.Start, p.Join.Stop))
	}),
)

// Package audittest replays recorded audit logs through the real pipeline, a Consumer in front of
// an aggregator Engine, for tests and benchmarks of what comes after: stores, frontends, golden
// traces.
//
// The recorded scenarios are in the module's testdata folder (testdata/<scenario>/audit.jsonl).
// A typical use:
//
//	sink := &aggregatortest.RecordingSink{}
//	err := audittest.ReplayFile(ctx, audittest.Config{Deps: aggregator.Deps{Sinks: []aggregator.Sink{sink}}},
//		filepath.Join("..", "testdata", "rollout", "audit.jsonl"))
//
// Package audit's own tests cannot use it (audittest imports audit).
package audittest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/audit/consumer"
)

// DefaultCluster is the cluster name given to replayed events when Config.Cluster is empty.
const DefaultCluster = "test"

// Config configures a Pipeline. The zero value has no sink: set Deps.Sinks.
type Config struct {
	// Cluster is the cluster the events are attributed to (DefaultCluster when empty).
	Cluster string
	// Consumer configures the audit consumer.
	Consumer consumer.Config
	// Aggregator configures the aggregator.
	Aggregator aggregator.Config
	// Deps are the aggregator's sinks, linkers and decorators (and its logger and metrics).
	Deps aggregator.Deps
}

// Pipeline is a started Consumer in front of a started aggregator Engine. Handle events, or
// HandleFile whole logs, then Stop, which waits for every link job: only then is everything in
// the sinks.
type Pipeline struct {
	Engine   *aggregator.Engine
	Consumer *consumer.Consumer
	cluster  string
}

// Start builds and starts a Pipeline.
func Start(ctx context.Context, cfg Config) (*Pipeline, error) {
	engine, err := aggregator.New(cfg.Aggregator, cfg.Deps)
	if err != nil {
		return nil, fmt.Errorf("audittest: %w", err)
	}
	consumer, err := consumer.New(cfg.Consumer, consumer.Deps{Aggregator: engine, Telemetry: cfg.Deps.Telemetry})
	if err != nil {
		return nil, fmt.Errorf("audittest: %w", err)
	}
	if err := engine.Start(ctx); err != nil {
		return nil, fmt.Errorf("audittest: %w", err)
	}
	if err := consumer.Start(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("audittest: %w", err), engine.Stop(ctx))
	}
	cluster := cfg.Cluster
	if cluster == "" {
		cluster = DefaultCluster
	}
	return &Pipeline{Engine: engine, Consumer: consumer, cluster: cluster}, nil
}

// Handle hands events to the consumer, in order.
func (p *Pipeline) Handle(ctx context.Context, events ...*auditv1.Event) {
	for _, ev := range events {
		p.Consumer.Handle(ctx, p.cluster, ev)
	}
}

// HandleFile decodes the audit log at path and hands its events to the consumer, in order. It
// returns how many it handed over.
func (p *Pipeline) HandleFile(ctx context.Context, path string) (int, error) {
	events, err := ReadFile(path)
	if err != nil {
		return 0, err
	}
	p.Handle(ctx, events...)
	return len(events), nil
}

// Stop stops the consumer and then the aggregator, which runs the link jobs still queued. Safe
// to call more than once.
func (p *Pipeline) Stop(ctx context.Context) error {
	return errors.Join(p.Consumer.Stop(ctx), p.Engine.Stop(ctx))
}

// Replay runs events through a new Pipeline and stops it.
func Replay(ctx context.Context, cfg Config, events []*auditv1.Event) error {
	p, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	p.Handle(ctx, events...)
	return p.Stop(ctx)
}

// ReplayFile runs the audit log at path through a new Pipeline and stops it.
func ReplayFile(ctx context.Context, cfg Config, path string) error {
	events, err := ReadFile(path)
	if err != nil {
		return err
	}
	return Replay(ctx, cfg, events)
}

// ReadFile decodes an audit log: one audit.k8s.io/v1 Event per line (JSON lines, as the API
// server's log backend writes them), gzip-compressed when path ends in ".gz". Blank lines are
// skipped; a line that does not decode is an error. An empty log is an error too: a replay of
// nothing is never what a test means.
func ReadFile(path string) ([]*auditv1.Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("audittest: %w", err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("audittest: %s: %w", path, err)
		}
		defer zr.Close()
		r = zr
	}
	var events []*auditv1.Event
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		ev, err := auditv1.DecodeEvent(bytes.Clone(line))
		if err != nil {
			return nil, fmt.Errorf("audittest: %s:%d: %w", path, n, err)
		}
		events = append(events, ev)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("audittest: %s: %w", path, err)
	}
	if len(events) == 0 {
		return nil, fmt.Errorf("audittest: %s: no audit events", path)
	}
	return events, nil
}

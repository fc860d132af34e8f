package instrument

import (
	"context"
	"errors"
	"fmt"

	"github.com/kelemetry/kelemetry/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// NewMeter returns an instrument factory of s's meter provider for the named instrumentation
// scope (the package's import path, by convention).
func NewMeter(s telemetry.Settings, scope string) *Meter {
	return &Meter{m: s.Provider().Meter(scope)}
}

// Meter creates instruments and keeps their errors, so that a constructor creates all of its
// instruments and checks once with Err. An instrument that cannot be created is replaced by a
// no-op one: a metric never stops the pipeline.
type Meter struct {
	m    metric.Meter
	errs []error
}

// Err reports every instrument that could not be created, or nil.
func (m *Meter) Err() error {
	if len(m.errs) == 0 {
		return nil
	}
	return fmt.Errorf("create metrics: %w", errors.Join(m.errs...))
}

func (m *Meter) fail(name string, err error) {
	m.errs = append(m.errs, fmt.Errorf("%s: %w", name, err))
}

// Counter creates a monotonic integer counter; unit is UCUM ("{event}", "By", "" for none).
// The initial attribute sets (attribute.EmptySet() for a counter recorded without attributes)
// are exported at 0 from the start, so that a rate or increase() over them sees the first
// occurrence instead of a series that appears with its first value.
func (m *Meter) Counter(name, desc, unit string, initial ...attribute.Set) metric.Int64Counter {
	c, err := m.m.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit(unit))
	if err != nil || c == nil {
		m.fail(name, err)
		return noop.Int64Counter{}
	}
	for _, set := range initial {
		c.Add(context.Background(), 0, metric.WithAttributeSet(set))
	}
	return c
}

// UpDownCounter creates an integer counter that may go down (a gauge kept by increments).
func (m *Meter) UpDownCounter(name, desc, unit string) metric.Int64UpDownCounter {
	c, err := m.m.Int64UpDownCounter(name, metric.WithDescription(desc), metric.WithUnit(unit))
	if err != nil || c == nil {
		m.fail(name, err)
		return noop.Int64UpDownCounter{}
	}
	return c
}

// Histogram creates a float histogram; bounds are its explicit bucket boundaries (none: the
// SDK's defaults). Durations are in seconds ("s").
func (m *Meter) Histogram(name, desc, unit string, bounds ...float64) metric.Float64Histogram {
	opts := []metric.Float64HistogramOption{metric.WithDescription(desc), metric.WithUnit(unit)}
	if len(bounds) > 0 {
		opts = append(opts, metric.WithExplicitBucketBoundaries(bounds...))
	}
	h, err := m.m.Float64Histogram(name, opts...)
	if err != nil || h == nil {
		m.fail(name, err)
		return noop.Float64Histogram{}
	}
	return h
}

// Gauge creates an observable integer gauge whose value callback returns at each collection;
// callback reports false to observe nothing (e.g. after the component closed). Unregister the
// returned registration when the component stops, so that the provider no longer calls it (and
// no longer holds the component). It is never nil.
func (m *Meter) Gauge(name, desc, unit string, callback func() (int64, bool)) metric.Registration {
	g, err := m.m.Int64ObservableGauge(name, metric.WithDescription(desc), metric.WithUnit(unit))
	if err != nil || g == nil {
		m.fail(name, err)
		return noRegistration{}
	}
	reg, err := m.m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if v, ok := callback(); ok {
			o.ObserveInt64(g, v)
		}
		return nil
	}, g)
	if err != nil || reg == nil {
		m.fail(name, err)
		return noRegistration{}
	}
	return reg
}

// noRegistration is the registration of a gauge that could not be created.
type noRegistration struct{ metric.Registration }

func (noRegistration) Unregister() error { return nil }

// FloatCounter creates a monotonic float counter (e.g. seconds or bytes summed).
func (m *Meter) FloatCounter(name, desc, unit string) metric.Float64Counter {
	c, err := m.m.Float64Counter(name, metric.WithDescription(desc), metric.WithUnit(unit))
	if err != nil || c == nil {
		m.fail(name, err)
		return noop.Float64Counter{}
	}
	return c
}

// Sets returns the attribute sets key=value of values: the initial sets of a counter split by
// one attribute, e.g. Counter(name, desc, unit, Sets("reason", "full", "stopped")...).
func Sets(key string, values ...string) []attribute.Set {
	out := make([]attribute.Set, len(values))
	for i, v := range values {
		out[i] = attribute.NewSet(attribute.String(key, v))
	}
	return out
}

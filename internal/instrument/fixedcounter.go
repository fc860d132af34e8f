package instrument

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// FixedCounter is a monotonic integer counter for hot paths whose attribute sets are chosen
// when it is made: Add(i, n) adds n to the sum of the i-th set with one atomic add, where a
// synchronous counter's Add costs about 200 ns (it looks the attribute set up each time). The
// sums are reported when the meter collects (an asynchronous counter), so readers and
// exporters see the same cumulative counter. Every set is reported from the start, at 0 until
// its first Add, so that a rate or increase() over it sees the first occurrence. Counters made with the same name on one meter (a component made twice)
// report their sums added up.
type FixedCounter struct {
	vals []atomic.Int64
	sets []attribute.Set
}

// fixedInstrument is the asynchronous counter of the FixedCounters of one name on one meter.
type fixedInstrument struct {
	mu       sync.Mutex
	counters []*FixedCounter
}

type fixedKey struct {
	meter metric.Meter
	name  string
}

// fixedInstruments has one entry per instrument name and meter a process makes FixedCounters
// with: a handful of names per meter provider, kept for the provider's life (its callback
// reads them).
var fixedInstruments sync.Map // fixedKey -> *fixedInstrument

// FixedCounter creates a FixedCounter with one point per set (none: a single point without
// attributes); unit is UCUM as for Counter. If the instrument cannot be created, the error is
// kept for Err and the counter still counts (nothing reports it).
func (m *Meter) FixedCounter(name, desc, unit string, sets ...attribute.Set) *FixedCounter {
	if len(sets) == 0 {
		sets = []attribute.Set{*attribute.EmptySet()}
	}
	c := &FixedCounter{vals: make([]atomic.Int64, len(sets)), sets: sets}
	inst := &fixedInstrument{counters: []*FixedCounter{c}}
	loaded := false
	if t := reflect.TypeOf(m.m); t != nil && t.Comparable() {
		var v any
		v, loaded = fixedInstruments.LoadOrStore(fixedKey{meter: m.m, name: name}, inst)
		inst = v.(*fixedInstrument)
	}
	if loaded {
		inst.mu.Lock()
		inst.counters = append(inst.counters, c)
		inst.mu.Unlock()
		return c
	}
	_, err := m.m.Int64ObservableCounter(name, metric.WithDescription(desc), metric.WithUnit(unit),
		metric.WithInt64Callback(inst.observe))
	if err != nil {
		m.fail(name, err)
	}
	return c
}

func (f *fixedInstrument) observe(_ context.Context, o metric.Int64Observer) error {
	f.mu.Lock()
	counters := f.counters
	f.mu.Unlock()
	if len(counters) == 1 {
		c := counters[0]
		for i := range c.vals {
			o.Observe(c.vals[i].Load(), metric.WithAttributeSet(c.sets[i]))
		}
		return nil
	}
	sums := map[attribute.Distinct]int64{}
	sets := map[attribute.Distinct]attribute.Set{}
	for _, c := range counters {
		for i := range c.vals {
			k := c.sets[i].Equivalent()
			sums[k] += c.vals[i].Load()
			sets[k] = c.sets[i]
		}
	}
	for k, v := range sums {
		o.Observe(v, metric.WithAttributeSet(sets[k]))
	}
	return nil
}

// Add adds n to the sum of the i-th attribute set given to FixedCounter.
func (c *FixedCounter) Add(i int, n int64) { c.vals[i].Add(n) }

// Value returns the sum of the i-th attribute set (of this counter only).
func (c *FixedCounter) Value(i int) int64 { return c.vals[i].Load() }

package kelemetrix

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kelemetry/kelemetry/audit/auditv1"
)

// Quantity names of MetricConfig.Quantity and quantityFilter.Quantity.
const (
	quantityRequestCount  = "requestCount"
	quantityLatency       = "latency"
	quantityLatencyRatio  = "latencyRatio"
	quantityRequestSize   = "requestSize"
	quantityResponseSize  = "responseSize"
	quantityDeliveryDelay = "deliveryDelay"
)

// quantityID numbers the quantities, indexing the per-event cache of their values.
type quantityID uint8

// quantityEnv is what a quantity needs besides the event.
type quantityEnv struct {
	now            time.Time
	defaultTimeout time.Duration
}

// quantity is one quantity provider.
type quantity struct {
	name string
	// unit is the UCUM unit of the instrument ("s", "By", "1", "{request}").
	unit string
	// buckets are a histogram's default bucket boundaries.
	buckets []float64
	// value returns the quantity, or false when the event does not have it.
	value func(env *quantityEnv, ev *auditv1.Event) (float64, bool)
}

var latencyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// quantities are the quantity providers, in quantityID order.
var quantities = []quantity{
	{quantityRequestCount, "{request}", []float64{1}, func(*quantityEnv, *auditv1.Event) (float64, bool) { return 1, true }},
	{quantityLatency, "s", latencyBuckets, func(_ *quantityEnv, ev *auditv1.Event) (float64, bool) {
		return latency(ev)
	}},
	{quantityLatencyRatio, "1", []float64{0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 1, 1.5}, func(env *quantityEnv, ev *auditv1.Event) (float64, bool) {
		l, ok := latency(ev)
		if !ok {
			return 0, false
		}
		t := requestTimeout(ev.RequestURI, env.defaultTimeout)
		if t <= 0 {
			return 0, false
		}
		return l / t.Seconds(), true
	}},
	{quantityRequestSize, "By", sizeBuckets, func(_ *quantityEnv, ev *auditv1.Event) (float64, bool) {
		if len(ev.RequestObject) == 0 {
			return 0, false
		}
		return float64(len(ev.RequestObject)), true
	}},
	{quantityResponseSize, "By", sizeBuckets, func(_ *quantityEnv, ev *auditv1.Event) (float64, bool) {
		if len(ev.ResponseObject) == 0 {
			return 0, false
		}
		return float64(len(ev.ResponseObject)), true
	}},
	{quantityDeliveryDelay, "s", latencyBuckets, func(env *quantityEnv, ev *auditv1.Event) (float64, bool) {
		if ev.StageTimestamp.IsZero() {
			return 0, false
		}
		return env.now.Sub(ev.StageTimestamp).Seconds(), true
	}},
}

var sizeBuckets = []float64{256, 1024, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20}

// quantityNames returns the names of the quantities, sorted.
func quantityNames() []string {
	names := make([]string, len(quantities))
	for i, q := range quantities {
		names[i] = q.name
	}
	slices.Sort(names)
	return names
}

func quantityByName(name string) (quantityID, bool) {
	for i, q := range quantities {
		if q.name == name {
			return quantityID(i), true
		}
	}
	return 0, false
}

// latency is the time from receipt to the event's stage, in seconds.
func latency(ev *auditv1.Event) (float64, bool) {
	if ev.RequestReceivedTimestamp.IsZero() || ev.StageTimestamp.IsZero() {
		return 0, false
	}
	d := ev.StageTimestamp.Sub(ev.RequestReceivedTimestamp)
	if d < 0 {
		return 0, false
	}
	return d.Seconds(), true
}

// requestTimeout is the request's timeout: its timeoutSeconds parameter (watches, lists), else
// its timeout parameter (a Go duration), else def.
func requestTimeout(uri string, def time.Duration) time.Duration {
	if v, ok := queryParam(uri, "timeoutSeconds"); ok {
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n > 0 && n < 1<<31 {
			return time.Duration(n) * time.Second
		}
	}
	if v, ok := queryParam(uri, "timeout"); ok {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			return d
		}
	}
	return def
}

// Ops of quantityFilter.Op.
type op uint8

const (
	opLess op = iota
	opGreater
	opLessEqual
	opGreaterEqual
)

func parseOp(s string) (op, bool) {
	switch s {
	case "<":
		return opLess, true
	case ">":
		return opGreater, true
	case "<=":
		return opLessEqual, true
	case ">=":
		return opGreaterEqual, true
	}
	return 0, false
}

func (o op) holds(v, threshold float64) bool {
	switch o {
	case opLess:
		return v < threshold
	case opGreater:
		return v > threshold
	case opLessEqual:
		return v <= threshold
	default:
		return v >= threshold
	}
}

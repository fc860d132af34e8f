package objdiff

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/diff"
	"github.com/kelemetry/kelemetry/telemetry"
)

var pod = aggregator.ObjectRef{Cluster: "c", Version: "v1", Resource: "pods", Namespace: "default", Name: "p"}

func podBody(rv, node, phase string) []byte {
	spec := `{"containers":[{"name":"app","image":"x"}]}`
	if node != "" {
		spec = `{"containers":[{"name":"app","image":"x"}],"nodeName":"` + node + `"}`
	}
	return []byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"default","resourceVersion":"` + rv +
		`","managedFields":[{"manager":"m"}]},"spec":` + spec + `,"status":{"phase":"` + phase + `"}}`)
}

func msgs(r Result) []string {
	var out []string
	for _, l := range r.Logs {
		out = append(out, l.Type+": "+l.Message)
	}
	return out
}

func TestStreamLifecycle(t *testing.T) {
	ctx := context.Background()
	s, err := NewStream(diff.StreamConfig{}, telemetry.Settings{})
	require.NoError(t, err)
	at := time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC)
	w := func(verb, sub string, isObj bool, body []byte, rv string) Write {
		return Write{Object: pod, Verb: verb, Subresource: sub, Response: body, IsObject: isObj, ResourceVersion: rv, Time: at}
	}

	r := s.Observe(ctx, w("create", "", true, podBody("1", "", "Pending"), "1"))
	require.Len(t, r.Logs, 1)
	assert.Equal(t, aggregator.LogTypeSnapshot, r.Logs[0].Type)
	assert.NotContains(t, r.Logs[0].Message, "managedFields")
	assert.Equal(t, at, r.Logs[0].Time)

	bind := w("create", "binding", false, []byte(`{"kind":"Status","status":"Success"}`), "")
	bind.Request = []byte(`{"kind":"Binding","apiVersion":"v1","metadata":{"name":"p"},"target":{"kind":"Node","name":"node-1"}}`)
	assert.Equal(t, []string{"diff: spec.nodeName <none> -> node-1"}, msgs(s.Observe(ctx, bind)))

	r = s.Observe(ctx, w("patch", "status", true, podBody("3", "node-1", "Running"), "3"))
	assert.Equal(t, []string{"diff: status.phase Pending -> Running"}, msgs(r), "the binding updated the kept version")
	assert.Equal(t, aggregator.Attrs{{Key: diff.AttrBaseRV, Value: "1"}}, r.Attributes)

	r = s.Observe(ctx, w("patch", "", true, podBody("4", "node-1", "Running"), "4"))
	assert.Equal(t, []string{"diff: no change besides bookkeeping fields (resourceVersion 3 -> 4)"}, msgs(r))

	// A delete with the object (graceful deletion), then one without.
	r = s.Observe(ctx, w("delete", "", true, podBody("5", "node-1", "Running"), "5"))
	require.Len(t, r.Logs, 1)
	kind, _ := r.Logs[0].Attributes.Get(diff.AttrSnapshotSource)
	assert.Equal(t, "response", kind)
	// The final removal returns the object again: a pointer to the snapshot and the changes.
	r = s.Observe(ctx, w("delete", "", true, podBody("6", "node-1", "Succeeded"), "6"))
	assert.Equal(t, []string{"diff: deletion snapshot taken at resourceVersion 5; changes since:", "diff: status.phase Running -> Succeeded"}, msgs(r))
	r = s.Observe(ctx, w("delete", "", false, []byte(`{"kind":"Status"}`), ""))
	require.Len(t, r.Logs, 1)
	kind, _ = r.Logs[0].Attributes.Get(diff.AttrSnapshotSource)
	assert.Equal(t, "last_seen", kind)
	assert.Equal(t, 0, s.Len())
	r = s.Observe(ctx, w("delete", "", false, []byte(`{"kind":"Status"}`), ""))
	assert.Equal(t, []string{"diff: deletion snapshot unavailable: no previous version seen"}, msgs(r))

	// Subresources that are not the object get nothing.
	assert.Empty(t, s.Observe(ctx, w("create", "eviction", false, []byte(`{}`), "")).Logs)
}

func TestStreamLimits(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	s, err := NewStream(diff.StreamConfig{CacheSize: 2, MaxChanges: 3, MaxValueBytes: 8, MaxSnapshotBytes: 50}, telemetry.Settings{MeterProvider: mp})
	require.NoError(t, err)
	obj := func(name string) aggregator.ObjectRef { o := pod; o.Name = name; return o }
	many := func(rv string, v string) []byte {
		var b strings.Builder
		b.WriteString(`{"metadata":{"resourceVersion":"` + rv + `"},"data":{`)
		for i := range 5 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"k%d":"%s-%d"`, i, v, i)
		}
		b.WriteString("}}")
		return []byte(b.String())
	}
	r := s.Observe(ctx, Write{Object: obj("a"), Verb: "create", Response: many("1", "a"), IsObject: true, ResourceVersion: "1"})
	assert.Contains(t, r.Logs[0].Message, "snapshot omitted")
	r = s.Observe(ctx, Write{Object: obj("a"), Verb: "update", Response: many("2", "a-much-longer-value"), IsObject: true, ResourceVersion: "2"})
	require.Len(t, r.Logs, 4)
	assert.Equal(t, "data.k0 a-0 -> a-much-l…", r.Logs[0].Message)
	assert.Equal(t, "2 more changes not shown", r.Logs[3].Message)
	for _, name := range []string{"b", "c"} {
		s.Observe(ctx, Write{Object: obj(name), Verb: "create", Response: many("1", name), IsObject: true, ResourceVersion: "1"})
	}
	assert.Equal(t, 2, s.Len())
	r = s.Observe(ctx, Write{Object: obj("a"), Verb: "update", Response: many("3", "a"), IsObject: true, ResourceVersion: "3"})
	assert.Equal(t, []string{"diff: diff unavailable: no previous version seen"}, msgs(r), "a was evicted")

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	var evictions int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == "kelemetry.diff.stream.evictions" {
				for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
					evictions += dp.Value
				}
			}
		}
	}
	assert.Equal(t, int64(2), evictions)

	// Disabled and nil streams do nothing.
	var nilStream *Stream
	assert.Empty(t, nilStream.Observe(ctx, Write{}).Logs)
	d, err := NewStream(diff.StreamConfig{Disabled: true}, telemetry.Settings{})
	require.NoError(t, err)
	assert.Empty(t, d.Observe(ctx, Write{Object: pod, Verb: "create", Response: podBody("1", "", "x"), IsObject: true}).Logs)
	assert.Error(t, diff.StreamConfig{CacheSize: -1}.Validate())
}

package consumer

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/diff"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/internal/auditfixture"
)

func logsOfType(ev *aggregator.Event, typ string) []aggregator.Log {
	var out []aggregator.Log
	for _, l := range ev.Logs {
		if l.Type == typ {
			out = append(out, l)
		}
	}
	return out
}

func messages(logs []aggregator.Log) []string {
	out := make([]string, len(logs))
	for i, l := range logs {
		out[i] = l.Message
	}
	return out
}

// TestConsumerDiffRollout replays the recorded rollout (create, scale 2->4, image change, scale
// 4->2, delete) and checks the diffs and snapshots on the Deployment's spans.
func TestConsumerDiffRollout(t *testing.T) {
	agg := &aggregatortest.RecordingAggregator{}
	c, err := New(Config{}, Deps{Aggregator: agg})
	require.NoError(t, err)
	ctx := context.Background()
	for _, ev := range auditfixture.Events(t, "rollout") {
		c.Handle(ctx, "kind", ev)
	}

	var deploy []*aggregator.Event
	for _, ev := range agg.Events() {
		for _, l := range ev.Logs {
			assert.NotContains(t, l.Message, "managedFields", ev.Title)
			for _, a := range l.Attributes {
				assert.NotContains(t, a.Value, "managedFields", ev.Title)
			}
		}
		if ev.Object.Resource == "deployments" && ev.Object.Name == "demo" {
			deploy = append(deploy, ev)
		}
	}
	require.NotEmpty(t, deploy)

	byTitle := func(title string) []*aggregator.Event {
		var out []*aggregator.Event
		for _, ev := range deploy {
			if ev.Title == title {
				out = append(out, ev)
			}
		}
		return out
	}

	// Creation snapshot, stripped.
	create := byTitle("admin create")
	require.Len(t, create, 1)
	snaps := logsOfType(create[0], aggregator.LogTypeSnapshot)
	require.Len(t, snaps, 1)
	assert.True(t, json.Valid([]byte(snaps[0].Message)))
	assert.Contains(t, snaps[0].Message, `"replicas":2`)
	kind, _ := snaps[0].Attributes.Get(diff.AttrSnapshotKind)
	assert.Equal(t, "creation", kind)

	// The scales.
	scales := byTitle("admin patch scale")
	require.Len(t, scales, 2)
	assert.Equal(t, []string{"spec.replicas 2 -> 4"}, messages(logsOfType(scales[0], aggregator.LogTypeDiff)))
	assert.Equal(t, []string{"spec.replicas 4 -> 2"}, messages(logsOfType(scales[1], aggregator.LogTypeDiff)))

	// The image change.
	patches := byTitle("admin patch")
	require.Len(t, patches, 1)
	lines := messages(logsOfType(patches[0], aggregator.LogTypeDiff))
	assert.Contains(t, lines, "spec.template.spec.containers[name=alpine].image alpine:3.16 -> alpine:3.17")
	for _, l := range logsOfType(patches[0], aggregator.LogTypeDiff) {
		if strings.Contains(l.Message, ".image ") {
			p, _ := l.Attributes.Get(diff.AttrPath)
			op, _ := l.Attributes.Get(diff.AttrOp)
			old, _ := l.Attributes.Get(diff.AttrOld)
			assert.Equal(t, "spec.template.spec.containers[name=alpine].image", p)
			assert.Equal(t, "replace", op)
			assert.Equal(t, `"alpine:3.16"`, old)
		}
	}

	// The controller's first status update after the scale bumps observedGeneration.
	var sawObservedGeneration bool
	for _, ev := range byTitle("system:serviceaccount:kube-system:deployment-controller update status") {
		for _, m := range messages(logsOfType(ev, aggregator.LogTypeDiff)) {
			if m == "status.observedGeneration 1 -> 2" {
				sawObservedGeneration = true
			}
			assert.NotContains(t, m, "spec.replicas", "the scale was attributed to the scale request")
		}
	}
	assert.True(t, sawObservedGeneration)

	// Failed requests carry no diff.
	for _, ev := range byTitle("system:serviceaccount:kube-system:deployment-controller update status (Conflict)") {
		assert.Empty(t, logsOfType(ev, aggregator.LogTypeDiff))
	}

	// The delete answered with a Status: the deletion snapshot is the last version seen.
	del := byTitle("admin delete")
	require.Len(t, del, 1)
	snaps = logsOfType(del[0], aggregator.LogTypeSnapshot)
	require.Len(t, snaps, 1)
	kind, _ = snaps[0].Attributes.Get(diff.AttrSnapshotKind)
	src, _ := snaps[0].Attributes.Get(diff.AttrSnapshotSource)
	assert.Equal(t, "deletion", kind)
	assert.Equal(t, "last_seen", src)
	assert.Contains(t, snaps[0].Message, `"image":"alpine:3.17"`)
	assert.True(t, json.Valid([]byte(snaps[0].Message)))

	// Every deployment write but the first has a diff or a note; none says unavailable.
	for _, ev := range deploy[1:] {
		for _, l := range logsOfType(ev, aggregator.LogTypeDiff) {
			op, _ := l.Attributes.Get(diff.AttrOp)
			assert.NotEqual(t, diff.OpUnavailable, op, ev.Title+": "+l.Message)
		}
	}
}

func TestConsumerDiffNotes(t *testing.T) {
	agg := &aggregatortest.RecordingAggregator{}
	c, err := New(Config{}, Deps{Aggregator: agg})
	require.NoError(t, err)
	ctx := context.Background()

	ev := consumerEvent() // an update of default/web returning rv 42
	c.Handle(ctx, "c1", ev)
	first := agg.Events()[0]
	assert.Equal(t, []string{"diff unavailable: no previous version seen"}, messages(logsOfType(first, aggregator.LogTypeDiff)))
	op, _ := first.Logs[0].Attributes.Get(diff.AttrOp)
	assert.Equal(t, diff.OpUnavailable, op)

	// A no-op update: the response has the request's resourceVersion.
	noop := consumerEvent()
	noop.AuditID = "a2"
	noop.ObjectRef.ResourceVersion = "42"
	c.Handle(ctx, "c1", noop)
	assert.Equal(t, []string{"no-op: resourceVersion 42 unchanged"}, messages(logsOfType(agg.Events()[1], aggregator.LogTypeDiff)))

	// A real change.
	next := consumerEvent()
	next.AuditID = "a3"
	next.ObjectRef.ResourceVersion = "42"
	next.ResponseObject = json.RawMessage(strings.Replace(strings.Replace(string(next.ResponseObject), `"42"`, `"43"`, 1), `"replicas":1`, `"replicas":3`, 1))
	c.Handle(ctx, "c1", next)
	third := agg.Events()[2]
	assert.Equal(t, []string{"spec.replicas 1 -> 3"}, messages(logsOfType(third, aggregator.LogTypeDiff)))
	base, _ := third.Attributes.Get(diff.AttrBaseRV)
	assert.Equal(t, "42", base)

	// An older version arriving late is not diffed against a newer one.
	late := consumerEvent()
	late.AuditID = "a4"
	late.ObjectRef.ResourceVersion = "40"
	late.ResponseObject = json.RawMessage(strings.Replace(string(late.ResponseObject), `"42"`, `"41"`, 1))
	c.Handle(ctx, "c1", late)
	assert.Contains(t, messages(logsOfType(agg.Events()[3], aggregator.LogTypeDiff))[0], "diff unavailable: the last version seen")

	// Disabled: no diff logs.
	agg2 := &aggregatortest.RecordingAggregator{}
	c2, err := New(Config{Diff: diff.StreamConfig{Disabled: true}}, Deps{Aggregator: agg2})
	require.NoError(t, err)
	c2.Handle(ctx, "c1", consumerEvent())
	assert.Empty(t, agg2.Events()[0].Logs)
}

func TestConsumerDiffSecrets(t *testing.T) {
	agg := &aggregatortest.RecordingAggregator{}
	c, err := New(Config{}, Deps{Aggregator: agg})
	require.NoError(t, err)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC)
	secret := func(id, verb, rv, password string) *auditv1.Event {
		return &auditv1.Event{AuditID: id, Stage: "ResponseComplete", Verb: verb, User: auditv1.UserInfo{Username: "alice"},
			ObjectRef:      &auditv1.ObjectReference{Resource: "secrets", Namespace: "default", Name: "db", APIVersion: "v1"},
			ResponseStatus: &auditv1.Status{Code: 200},
			ResponseObject: json.RawMessage(`{"kind":"Secret","apiVersion":"v1","metadata":{"name":"db","namespace":"default","resourceVersion":"` + rv +
				`"},"data":{"password":"` + password + `"}}`),
			RequestReceivedTimestamp: t0, StageTimestamp: t0}
	}
	c.Handle(ctx, "c1", secret("s1", "create", "1", "aHVudGVyMg=="))
	c.Handle(ctx, "c1", secret("s2", "update", "2", "c2VjcmV0"))
	evs := agg.Events()
	require.Len(t, evs, 2)
	for _, ev := range evs {
		assert.NotContains(t, string(ev.Object.Body), "aHVudGVyMg==")
		assert.NotContains(t, string(ev.Object.Body), "c2VjcmV0")
		for _, l := range ev.Logs {
			assert.NotContains(t, l.Message, "aHVudGVyMg==")
			assert.NotContains(t, l.Message, "c2VjcmV0")
			for _, a := range l.Attributes {
				assert.NotContains(t, a.Value, "aHVudGVyMg==")
				assert.NotContains(t, a.Value, "c2VjcmV0")
			}
		}
	}
	diffs := logsOfType(evs[1], aggregator.LogTypeDiff)
	require.Len(t, diffs, 1)
	assert.True(t, strings.HasPrefix(diffs[0].Message, "data.password <redacted:"), diffs[0].Message)
	red, _ := diffs[0].Attributes.Get(diff.AttrRedacted)
	assert.Equal(t, "true", red)
}

type discardAggregator struct{}

func (discardAggregator) Send(context.Context, *aggregator.Event) error { return nil }

// BenchmarkConsumerHandleBulk: the consumer alone (decoded events in, aggregator events out) on
// the bulk fixture, with and without the audit-stream diff. The repeat check is off: every
// iteration hands the consumer the same events again, which it would otherwise drop as repeats.
func BenchmarkConsumerHandleBulk(b *testing.B) {
	events := auditfixture.Events(b, "bulk")
	for _, bc := range []struct {
		name string
		cfg  Config
	}{{"diff", Config{DedupSize: -1}}, {"nodiff", Config{DedupSize: -1, Diff: diff.StreamConfig{Disabled: true}}}} {
		b.Run(bc.name, func(b *testing.B) {
			c, err := New(bc.cfg, Deps{Aggregator: discardAggregator{}})
			require.NoError(b, err)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				for _, ev := range events {
					c.Handle(ctx, "bulk", ev)
				}
			}
			b.ReportMetric(float64(len(events)*b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkDiffCacheMemory reports the heap the audit-stream diff cache holds per kept object
// after the bulk fixture (pods and ReplicaSets of 20 Deployments).
func BenchmarkDiffCacheMemory(b *testing.B) {
	events := auditfixture.Events(b, "bulk")
	for range b.N {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		c, err := New(Config{}, Deps{Aggregator: discardAggregator{}})
		require.NoError(b, err)
		for _, ev := range events {
			c.Handle(context.Background(), "bulk", ev)
		}
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		n := c.stream.Len()
		b.ReportMetric(float64(n), "objects")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "heapB/object")
		runtime.KeepAlive(c)
	}
}

package kelemetry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/audit/consumer"
	"github.com/kelemetry/kelemetry/audit/queue"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/kube"
	"github.com/kelemetry/kelemetry/linker"
	"github.com/kelemetry/kelemetry/store/memory"
	"github.com/kelemetry/kelemetry/telemetry"
)

// replayShape is how one replay feeds the pipeline: queue partitions, link workers and whether the
// events are regrouped into batches that interleave objects differently (each object's own events
// stay in their order, as kube-apiserver and the queue guarantee).
type replayShape struct {
	partitions, linkWorkers int
	regroup                 uint64 // 0: the recorded batches as they are; else the shuffle seed
	// passes is how many times the batches are posted (0 or 1: once), one pass after the other,
	// as `auditload --repeat` or a sender retrying everything would.
	passes int
	// posters enqueue batches at once (0 or 1: one after the other): an object whose events
	// span several batches then sees them in an order that depends on timing.
	posters int
	// dedupSize is the consumer's ConsumerConfig.DedupSize.
	dedupSize int
}

// replayFixture runs the recorded batches through queue -> consumer -> aggregator (built-in
// linkers) into the memory store and returns every stored span rendered as JSON, keyed by trace
// and span ID.
func replayFixture(t *testing.T, batches [][]byte, shape replayShape) map[string]string {
	t.Helper()
	ctx := context.Background()
	sink := &aggregatortest.RecordingSink{}
	mem := memory.New(memory.Config{}, 0)
	engine, err := aggregator.New(aggregator.Config{LinkWorkers: shape.linkWorkers}, aggregator.Deps{
		Sinks: []aggregator.Sink{sink, mem},
		Linkers: []aggregator.Linker{
			linker.NewOwnerLinker(kube.NewStaticMapper(), nil, telemetry.Settings{}),
			linker.NewAnnotationLinker(nil, telemetry.Settings{}),
		},
	})
	require.NoError(t, err)
	require.NoError(t, engine.Start(ctx))
	consumer, err := consumer.New(consumer.Config{DedupSize: shape.dedupSize}, consumer.Deps{Aggregator: engine})
	require.NoError(t, err)
	q, err := queue.New(queue.Config{Partitions: shape.partitions}, queue.Deps{Handle: consumer.Handle})
	require.NoError(t, err)
	require.NoError(t, q.Start(ctx))

	var lists [][]*auditv1.Event
	for _, b := range batches {
		evs, err := auditv1.DecodeEventList(b)
		require.NoError(t, err)
		lists = append(lists, evs)
	}
	if shape.regroup != 0 {
		lists = regroup(lists, shape.regroup)
	}
	work := make(chan []*auditv1.Event)
	errs := make(chan error, max(1, shape.posters))
	var posting sync.WaitGroup
	for range max(1, shape.posters) {
		posting.Go(func() {
			for evs := range work {
				if err := q.EnqueueWait(ctx, "determ", evs); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for range max(1, shape.passes) {
		for _, evs := range lists {
			work <- evs
		}
	}
	close(work)
	posting.Wait()
	close(errs)
	require.NoError(t, <-errs)
	require.NoError(t, q.Flush(ctx))
	require.NoError(t, q.Stop(ctx))
	require.NoError(t, engine.Stop(ctx))

	out := storedSpans(ctx, t, sink, mem)
	require.Len(t, out, len(sink.Spans()), "the store holds every distinct span")
	return out
}

// storedSpans is what the memory store holds, trace by trace (the recording sink names the
// traces): each span's JSON by trace and span ID.
func storedSpans(ctx context.Context, t *testing.T, sink *aggregatortest.RecordingSink, mem *memory.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	traces := map[trace.TraceID]bool{}
	for _, sp := range sink.Spans() {
		traces[sp.TraceID] = true
	}
	for tid := range traces {
		spans, err := mem.GetTrace(ctx, tid)
		require.NoError(t, err)
		for _, sp := range spans {
			b, err := json.Marshal(sp)
			require.NoError(t, err)
			out[sp.TraceID.String()+"/"+sp.SpanID.String()] = string(b)
		}
	}
	return out
}

// regroup deals the events into new batches of random sizes, taking each next event from a random
// object: every object's events keep their relative order, objects interleave differently.
func regroup(lists [][]*auditv1.Event, seed uint64) [][]*auditv1.Event {
	type objKey struct{ group, resource, namespace, name, id string }
	byObj := map[objKey][]*auditv1.Event{}
	var keys []objKey
	for _, evs := range lists {
		for _, ev := range evs {
			var k objKey
			if r := ev.ObjectRef; r != nil {
				k = objKey{group: r.APIGroup, resource: r.Resource, namespace: r.Namespace, name: r.Name}
				if k.name == "" && ev.Verb == "create" {
					// generateName: the object is named in the response only.
					var body struct {
						Metadata struct{ Name string } `json:"metadata"`
					}
					if json.Unmarshal(ev.ResponseObject, &body) == nil {
						k.name = body.Metadata.Name
					}
				}
			} else {
				k = objKey{id: ev.AuditID}
			}
			if _, ok := byObj[k]; !ok {
				keys = append(keys, k)
			}
			byObj[k] = append(byObj[k], ev)
		}
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var out [][]*auditv1.Event
	var cur []*auditv1.Event
	size := 1 + rng.IntN(200)
	for len(keys) > 0 {
		i := rng.IntN(len(keys))
		k := keys[i]
		cur = append(cur, byObj[k][0])
		if byObj[k] = byObj[k][1:]; len(byObj[k]) == 0 {
			keys[i] = keys[len(keys)-1]
			keys = keys[:len(keys)-1]
		}
		if len(cur) >= size {
			out = append(out, cur)
			cur, size = nil, 1+rng.IntN(200)
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// diffReplays reports the spans that differ between two replays (missing, extra or changed).
func diffReplays(a, b map[string]string) []string {
	var diffs []string
	for k, va := range a {
		vb, ok := b[k]
		switch {
		case !ok:
			diffs = append(diffs, "only in first: "+va)
		case va != vb:
			diffs = append(diffs, fmt.Sprintf("changed:\n  %s\n  %s", va, vb))
		}
	}
	for k, vb := range b {
		if _, ok := a[k]; !ok {
			diffs = append(diffs, "only in second: "+vb)
		}
	}
	sort.Strings(diffs)
	return diffs
}

// TestReplayDeterministic: the same audit events give the same stored spans (IDs and contents)
// whatever the queue partitions, the link workers and the interleaving of objects across batches.
// The unit tier replays the first part of the bulk fixture; KELEMETRY_DETERM_FULL=1 replays all of
// it.
func TestReplayDeterministic(t *testing.T) {
	batches, _ := bulkBatches(t)
	if os.Getenv("KELEMETRY_DETERM_FULL") == "" && len(batches) > 40 {
		batches = batches[:40]
	}
	base := replayFixture(t, batches, replayShape{partitions: 1, linkWorkers: 1})
	require.NotEmpty(t, base)
	t.Logf("%d batches, %d distinct spans", len(batches), len(base))
	for _, shape := range []replayShape{
		{partitions: 8, linkWorkers: 4},
		{partitions: 3, linkWorkers: 8, regroup: 1},
		{partitions: 16, linkWorkers: 2, regroup: 2},
	} {
		got := replayFixture(t, batches, shape)
		diffs := diffReplays(base, got)
		if len(diffs) > 10 {
			diffs = append(diffs[:10], fmt.Sprintf("... %d more", len(diffs)-10))
		}
		require.Empty(t, diffs, "shape %+v: %d spans against %d", shape, len(got), len(base))
	}
}

// TestReplayRepeatedDeterministic: posting the same audit events again (same audit IDs, as
// `auditload --repeat` or a sender's retries do) leaves the stored spans as one posting does,
// whatever the partitions and link workers. Before the consumer dropped repeated deliveries, each
// later pass rewrote the event spans with diffs against the object's last version of the previous
// pass ("the last version seen is newer than this one").
func TestReplayRepeatedDeterministic(t *testing.T) {
	batches, _ := bulkBatches(t)
	if os.Getenv("KELEMETRY_DETERM_FULL") == "" && len(batches) > 40 {
		batches = batches[:40]
	}
	base := replayFixture(t, batches, replayShape{partitions: 1, linkWorkers: 1})
	for _, shape := range []replayShape{
		{partitions: 1, linkWorkers: 1, passes: 3},
		{partitions: 8, linkWorkers: 4, passes: 3, regroup: 3},
		{partitions: 3, linkWorkers: 8, passes: 5},
	} {
		got := replayFixture(t, batches, shape)
		diffs := diffReplays(base, got)
		if len(diffs) > 10 {
			diffs = append(diffs[:10], fmt.Sprintf("... %d more", len(diffs)-10))
		}
		require.Empty(t, diffs, "shape %+v: %d spans against %d", shape, len(got), len(base))
	}
}

// TestReplayConcurrentPostersSameSpanIDs: when batches are posted several at once (as
// kube-apiserver's batching webhook backend and auditload --workers do), an object whose events
// span adjacent batches may see them in another order; its diffs (against the previous version
// seen) and the time of a link span may then differ, but the set of stored spans does not: the
// same span IDs, kinds and names, repeated passes included.
func TestReplayConcurrentPostersSameSpanIDs(t *testing.T) {
	batches, _ := bulkBatches(t)
	if os.Getenv("KELEMETRY_DETERM_FULL") == "" && len(batches) > 40 {
		batches = batches[:40]
	}
	skeleton := func(spans map[string]string) map[string]string {
		out := make(map[string]string, len(spans))
		for k, v := range spans {
			var sp struct {
				Kind, Name string
				ParentID   string `json:"parentID"`
			}
			require.NoError(t, json.Unmarshal([]byte(v), &sp))
			out[k] = sp.Kind + " " + sp.Name + " " + sp.ParentID
		}
		return out
	}
	base := skeleton(replayFixture(t, batches, replayShape{partitions: 1, linkWorkers: 1}))
	for _, shape := range []replayShape{
		{partitions: 4, linkWorkers: 2, posters: 4},
		{partitions: 8, linkWorkers: 4, posters: 4, passes: 3},
		{partitions: 2, linkWorkers: 3, posters: 8, passes: 3, dedupSize: -1},
	} {
		got := skeleton(replayFixture(t, batches, shape))
		diffs := diffReplays(base, got)
		if len(diffs) > 10 {
			diffs = append(diffs[:10], fmt.Sprintf("... %d more", len(diffs)-10))
		}
		require.Empty(t, diffs, "shape %+v: %d spans against %d", shape, len(got), len(base))
	}
}

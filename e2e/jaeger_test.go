package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/e2e/cluster"
	"github.com/kelemetry/kelemetry/e2e/jaegerproc"
	"github.com/kelemetry/kelemetry/e2e/kapi"
)

// rolloutDir holds the recorded rollout (a Deployment "demo" rolled out over two ReplicaSets of
// four Pods each, then deleted).
var rolloutDir = filepath.Join("..", "testdata", "rollout")

// rolloutCluster is the cluster name the all-in-one gives the replayed rollout.
const rolloutCluster = "rollout"

// rolloutRange returns the time range of the recorded audit log.
func rolloutRange(t *testing.T) (from, to time.Time) {
	t.Helper()
	f, err := os.Open(filepath.Join(rolloutDir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			Received time.Time `json:"requestReceivedTimestamp"`
			Stage    time.Time `json:"stageTimestamp"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		if from.IsZero() || ev.Received.Before(from) {
			from = ev.Received
		}
		if ev.Stage.After(to) {
			to = ev.Stage
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if from.IsZero() {
		t.Fatal("empty audit log")
	}
	return from, to
}

// TestJaegerQueryOverKelemetry puts a stock Jaeger v2 Query in front of Kelemetry: the all-in-one
// replays the recorded rollout and serves jaeger.storage.v2 on --remote-storage-addr; Jaeger
// reads it through a "grpc" storage backend. Jaeger's HTTP API (what Jaeger UI and Grafana call)
// then lists the display modes as services and the cluster as operation, finds the Deployment's
// merged tree by the short keys users type (the same tree as the all-in-one's own API answers),
// reads it again by its ID, and draws the object graph as dependencies. When Kelemetry is down,
// Jaeger answers an error at once, and recovers when it is back.
func TestJaegerQueryOverKelemetry(t *testing.T) {
	needEnv(t)
	start := time.Now()
	ctx := t.Context()
	rsAddr, err := jaegerproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	aio := startKelemetryOpts(t, "kelemetry", cluster.AllInOneOptions{
		DataDir:   filepath.Join(t.TempDir(), "data"),
		ExtraArgs: append(rolloutReplayArgs(t), "--remote-storage-addr="+rsAddr),
	})
	kel := jaegerproc.NewClient(aio.URL)
	started := time.Now()
	jq := jaegerproc.StartT(t, jaegerproc.Options{Mode: jaegerproc.ModeQuery, RemoteStorage: rsAddr, RemoteTimeout: 3 * time.Second})
	jaegerStart := time.Since(started)
	jc := jq.Client()

	from, to := rolloutRange(t)
	search := jaegerproc.TraceQuery{
		Service: "tracing [full tree]",
		Tags:    map[string]string{"resource": "deployments", "name": "demo"},
		Start:   from.Add(-time.Hour), End: to.Add(time.Hour), Limit: 5,
	}

	// The all-in-one's own answer once the replay is in (every event handled, every link job
	// done): the Deployment, 2 ReplicaSets, 8 Pods.
	if err := aio.Exited(); err != nil {
		t.Fatal(err)
	}
	waitCaughtUp(t, aio)
	trs, err := kel.FindTraces(ctx, search)
	if err != nil || len(trs) != 1 {
		t.Fatalf("the all-in-one's tree: %d results, %v", len(trs), err)
	}
	if got := objectCounts(trs[0]); got["deployments"] != 1 || got["replicasets"] != 2 || got["pods"] != 8 {
		t.Fatalf("the all-in-one's tree: objects %v, want 1 deployment, 2 replicasets, 8 pods", got)
	}
	want := trs[0]

	services, err := jc.Services(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := containsAll(services, []string{"tracing", "tracing [full tree]", "tree", "timeline", "grouped"}); err != nil {
		t.Errorf("Jaeger /api/services: %v", err)
	}
	if slices.Contains(services, "jaeger") {
		t.Errorf("Jaeger /api/services lists Jaeger's own traces: %v", services)
	}
	if ops, err := jc.Operations(ctx, "tracing"); err != nil || !slices.Equal(ops, []string{rolloutCluster}) {
		t.Errorf("Jaeger /api/services/tracing/operations = %v, %v; want [%s]", ops, err, rolloutCluster)
	}

	trs, err = jc.FindTraces(ctx, search)
	if err != nil {
		t.Fatal(err)
	}
	if len(trs) != 1 {
		t.Fatalf("Jaeger /api/traces: %d results, want 1", len(trs))
	}
	if err := sameTree(trs[0], want); err != nil {
		t.Errorf("Jaeger /api/traces vs the all-in-one's: %v", err)
	}
	byOp := search
	byOp.Operation = rolloutCluster
	if trs, err := jc.FindTraces(ctx, byOp); err != nil || len(trs) != 1 {
		t.Errorf("Jaeger /api/traces with operation %s: %d results, %v", rolloutCluster, len(trs), err)
	}
	other := search
	other.Tags = map[string]string{"resource": "deployments", "name": "nope"}
	if trs, err := jc.FindTraces(ctx, other); err != nil || len(trs) != 0 {
		t.Errorf("Jaeger /api/traces for an unknown Deployment: %d results, %v", len(trs), err)
	}

	byID, err := jc.Trace(ctx, trs[0].TraceID)
	if err != nil {
		t.Fatal(err)
	}
	if err := sameTree(byID, want); err != nil {
		t.Errorf("Jaeger /api/traces/%s vs the all-in-one's search: %v", trs[0].TraceID, err)
	}

	deps, err := jc.Dependencies(ctx, to.Add(time.Hour), to.Sub(from)+2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	edges := map[string]uint64{}
	for _, d := range deps {
		edges[d.Parent+" -> "+d.Child] = d.CallCount
	}
	if edges["deployments -> replicasets"] != 2 || edges["replicasets -> pods"] != 8 {
		t.Errorf("Jaeger /api/dependencies = %v, want deployments -> replicasets (2), replicasets -> pods (8)", edges)
	}

	// Kelemetry down: an error at once (the grpc backend's connection is refused), not a hang.
	if err := aio.Stop(); err != nil {
		t.Fatal(err)
	}
	downAt := time.Now()
	_, err = jc.FindTraces(ctx, search)
	var he *jaegerproc.HTTPError
	if !errors.As(err, &he) || he.Status != http.StatusInternalServerError || !strings.Contains(he.Body, "Unavailable") {
		t.Errorf("Jaeger /api/traces with Kelemetry down: %v, want a 500 saying Unavailable", err)
	}
	if took := time.Since(downAt); took > 5*time.Second {
		t.Errorf("Jaeger took %s to answer with Kelemetry down", took)
	}
	if aio, err = aio.StartAgain(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = aio.Stop() }) // startKelemetryOpts stops the first process
	restartedAt := time.Now()
	eventually(t, kelemetryTimeout, "Jaeger answering again once Kelemetry is back", func(ctx context.Context) error {
		tr, err := jc.Trace(ctx, byID.TraceID)
		if err != nil {
			return err
		}
		return sameTree(tr, want)
	})
	logTimings(t, start, "jaeger started in", jaegerStart.Round(time.Millisecond),
		"recovered after Kelemetry's restart in", time.Since(restartedAt).Round(time.Millisecond))
}

// TestJaegerBackendStoresKelemetrySpans writes into Jaeger as the trace database: the all-in-one
// replays the recorded rollout into its embedded store and, through its OTLP sink, into a Jaeger
// with a memory backend (jaegerproc.ModeBackend, the shape Kelemetry's Jaeger-backed store reads
// through remote_storage). Every stored trace of every object is then in Jaeger with the same
// spans, and Jaeger finds the Deployment's object trace by its attributes.
func TestJaegerBackendStoresKelemetrySpans(t *testing.T) {
	needEnv(t)
	start := time.Now()
	ctx := t.Context()
	jb := jaegerproc.StartT(t, jaegerproc.Options{Mode: jaegerproc.ModeBackend})
	aio := startKelemetry(t, "kelemetry", append(rolloutReplayArgs(t), "--otlp-endpoint=grpc://"+jb.OTLPAddr)...)
	kel := kapi.New(aio.URL)
	jc := jb.Client()

	var objects []kapi.Object
	eventually(t, kelemetryTimeout, "the replayed rollout in the all-in-one", func(ctx context.Context) error {
		if err := aio.Exited(); err != nil {
			t.Fatal(err)
		}
		objs, err := kel.Objects(ctx, kapi.Query{Cluster: rolloutCluster, Limit: 1000})
		if err != nil {
			return err
		}
		pods := 0
		for _, o := range objs {
			if o.Resource == "pods" {
				pods++
			}
		}
		if pods < 8 {
			return fmt.Errorf("%d objects, %d pods, want 8 pods at least", len(objs), pods)
		}
		objects = objs
		return nil
	})

	traces, spans, dups := 0, 0, 0
	eventually(t, kelemetryTimeout, "every stored trace in Jaeger", func(ctx context.Context) error {
		traces, spans, dups = 0, 0, 0
		for _, o := range objects {
			for _, w := range o.Windows {
				want, err := kel.StoredTrace(ctx, w.TraceID)
				if err != nil {
					return err
				}
				got, err := jc.Trace(ctx, w.TraceID)
				if err != nil {
					return fmt.Errorf("%s/%s: %w", o.Resource, o.Name, err)
				}
				d, err := sameSpans(got, want)
				if err != nil {
					return fmt.Errorf("%s/%s trace %s: %w", o.Resource, o.Name, w.TraceID, err)
				}
				traces++
				spans += len(want.Spans)
				dups += d
			}
		}
		return nil
	})

	services, err := jc.Services(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := containsAll(services, []string{"object", "audit", "link"}); err != nil {
		t.Errorf("Jaeger /api/services: %v", err)
	}
	from, to := rolloutRange(t)
	found, err := jc.FindTraces(ctx, jaegerproc.TraceQuery{
		Service: "object",
		Tags:    map[string]string{"kelemetry.object.resource": "deployments", "kelemetry.object.name": "demo"},
		Start:   from.Add(-time.Hour), End: to.Add(time.Hour), Limit: 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	var wantIDs, gotIDs []string
	for _, o := range objects {
		if o.Resource == "deployments" && o.Name == "demo" {
			for _, w := range o.Windows {
				wantIDs = append(wantIDs, normID(w.TraceID))
			}
		}
	}
	for _, tr := range found {
		gotIDs = append(gotIDs, normID(tr.TraceID))
	}
	if err := sameSet(gotIDs, wantIDs); err != nil {
		t.Errorf("Jaeger's search for deployments/demo by its attributes: %v", err)
	}
	logTimings(t, start, "objects", len(objects), "traces", traces, "spans", spans, "extra copies in Jaeger", dups)
}

// sameSpans checks that a trace read back from Jaeger holds the spans of Kelemetry's stored
// trace: the same span IDs, operations and parents. The same span may have been delivered more
// than once (the embedded store upserts, Jaeger keeps every copy; a Jaeger-backed reader keeps
// one per span ID): it returns the number of extra copies.
func sameSpans(got, want kapi.Trace) (dups int, err error) {
	gs := map[string]kapi.Span{}
	for _, s := range got.Spans {
		if _, ok := gs[s.SpanID]; ok {
			dups++
		}
		gs[s.SpanID] = s
	}
	ws := map[string]bool{}
	for _, w := range want.Spans {
		ws[w.SpanID] = true
		g, ok := gs[w.SpanID]
		if !ok {
			return dups, fmt.Errorf("span %s (%s) missing", w.SpanID, w.OperationName)
		}
		if g.OperationName != w.OperationName || parent(g) != parent(w) {
			return dups, fmt.Errorf("span %s: %q under %q, want %q under %q", w.SpanID, g.OperationName, parent(g), w.OperationName, parent(w))
		}
	}
	for id, g := range gs {
		if !ws[id] {
			return dups, fmt.Errorf("span %s (%s) is not in Kelemetry's store", id, g.OperationName)
		}
	}
	return dups, nil
}

// objectCounts counts the object spans of a trace by resource.
func objectCounts(tr kapi.Trace) map[string]int {
	out := map[string]int{}
	for _, s := range tr.Spans {
		if s.Kind() == kapi.KindObject {
			out[s.Tag("resource")]++
		}
	}
	return out
}

// normID strips the leading zeros Jaeger drops from trace IDs.
func normID(id string) string { return strings.TrimLeft(strings.ToLower(id), "0") }

// sameTree compares a trace read through Jaeger with Kelemetry's own rendering: the same trace
// ID, the same spans (ID, parent, operation, source), each with Kelemetry's tags (Jaeger may
// add its own) and logs.
func sameTree(got, want kapi.Trace) error {
	if normID(got.TraceID) != normID(want.TraceID) {
		return fmt.Errorf("trace ID %s, want %s", got.TraceID, want.TraceID)
	}
	gs := map[string]kapi.Span{}
	for _, s := range got.Spans {
		gs[s.SpanID] = s
	}
	if len(gs) != len(want.Spans) {
		return fmt.Errorf("%d spans, want %d", len(gs), len(want.Spans))
	}
	for _, w := range want.Spans {
		g, ok := gs[w.SpanID]
		if !ok {
			return fmt.Errorf("span %s (%s) missing", w.SpanID, w.OperationName)
		}
		if g.OperationName != w.OperationName {
			return fmt.Errorf("span %s: operation %q, want %q", w.SpanID, g.OperationName, w.OperationName)
		}
		if parent(g) != parent(w) {
			return fmt.Errorf("span %s (%s): parent %q, want %q", w.SpanID, w.OperationName, parent(g), parent(w))
		}
		if gsrc, wsrc := got.Source(g), want.Source(w); gsrc != wsrc {
			return fmt.Errorf("span %s (%s): service %q, want %q", w.SpanID, w.OperationName, gsrc, wsrc)
		}
		for _, kv := range w.Tags {
			if kv.Key == "error" {
				continue // a span status in OTLP
			}
			if gv := g.Tag(kv.Key); gv != fmt.Sprint(kv.Value) {
				return fmt.Errorf("span %s (%s): tag %s = %q, want %q", w.SpanID, w.OperationName, kv.Key, gv, fmt.Sprint(kv.Value))
			}
		}
		if gl, wl := logLines(g, true), logLines(w, false); !slices.Equal(gl, wl) {
			return fmt.Errorf("span %s (%s): logs\n%q\nwant\n%q", w.SpanID, w.OperationName, gl, wl)
		}
	}
	return nil
}

// parent is the span ID of a span's first CHILD_OF reference.
func parent(s kapi.Span) string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// logLines renders a span's logs, sorted, each as its timestamp and sorted fields. viaOTLP drops
// the field event=log from logs that came through OTLP: an OTLP event needs a name, and
// storageapi names a log without an "event" field "log", which Jaeger shows as that field.
func logLines(s kapi.Span, viaOTLP bool) []string {
	out := make([]string, 0, len(s.Logs))
	for _, l := range s.Logs {
		fields := make([]string, 0, len(l.Fields))
		for _, f := range l.Fields {
			if viaOTLP && f.Key == "event" && f.Value == "log" {
				continue
			}
			fields = append(fields, f.Key+"="+fmt.Sprint(f.Value))
		}
		sort.Strings(fields)
		out = append(out, fmt.Sprint(l.Timestamp, " ", strings.Join(fields, " ")))
	}
	sort.Strings(out)
	return out
}

// tail returns the end of a log file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

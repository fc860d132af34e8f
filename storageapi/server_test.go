package storageapi_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/frontend"
	"github.com/kelemetry/kelemetry/internal/frontendtest"
	"github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/storageapi/storagev2"
	"github.com/kelemetry/kelemetry/store"
	"github.com/kelemetry/kelemetry/store/memory"
	"github.com/kelemetry/kelemetry/telemetry"
)

// The rollout fixture: recorded between 17:00 and 17:11 UTC, replayed as cluster "test".
var (
	rolloutFrom = frontendtest.RolloutFrom
	rolloutTo   = frontendtest.RolloutTo
)

// rollout is the bundled rollout replayed through the real pipeline (decoder, consumer,
// aggregator with the owner and annotation linkers) into a memory store, once per test binary.
func rollout(t testing.TB) *memory.Store { return frontendtest.Rollout(t) }

type clients struct {
	traces storagev2.TraceReaderClient
	deps   storagev2.DependencyReaderClient
}

// serve runs a Server over e on an in-memory gRPC connection.
func serve(t *testing.T, e *frontend.Engine) clients {
	t.Helper()
	return serveWith(t, e, telemetry.Settings{})
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func strAttr(k, v string) *storagev2.KeyValue {
	return &storagev2.KeyValue{Key: k, Value: &storagev2.AnyValue{Value: &storagev2.AnyValue_StringValue{StringValue: v}}}
}

func deploymentQuery(service string) *storagev2.TraceQueryParameters {
	return &storagev2.TraceQueryParameters{
		ServiceName:  service,
		Attributes:   []*storagev2.KeyValue{strAttr("resource", "deployments"), strAttr("name", "demo")},
		StartTimeMin: timestamppb.New(rolloutFrom),
		StartTimeMax: timestamppb.New(rolloutTo),
		SearchDepth:  20,
	}
}

func code(err error) codes.Code { return status.Code(err) }

// readAll drains a stream of TracesData.
func readAll(t *testing.T, s grpc.ServerStreamingClient[tracev1.TracesData]) ([]*tracev1.TracesData, error) {
	t.Helper()
	var out []*tracev1.TracesData
	for {
		td, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, td)
	}
}

func spansOf(tds []*tracev1.TracesData) []*tracev1.Span {
	var out []*tracev1.Span
	for _, td := range tds {
		for _, rs := range td.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				out = append(out, ss.GetSpans()...)
			}
		}
	}
	return out
}

func TestGetServicesAreDisplayModes(t *testing.T) {
	c := serve(t, frontend.NewEngine(rollout(t), 0, frontend.Config{}))
	resp, err := c.traces.GetServices(ctxT(t), &storagev2.GetServicesRequest{})
	require.NoError(t, err)
	want := make([]string, 0, len(query.Modes()))
	for _, m := range query.Modes() {
		want = append(want, m.Name())
	}
	assert.Equal(t, want, resp.GetServices())
	assert.Equal(t, "tracing", resp.GetServices()[0])
}

func TestGetOperationsAreClusters(t *testing.T) {
	c := serve(t, frontend.NewEngine(rollout(t), 0, frontend.Config{}))
	resp, err := c.traces.GetOperations(ctxT(t), &storagev2.GetOperationsRequest{Service: "tracing [full tree]", SpanKind: "server"})
	require.NoError(t, err)
	require.Len(t, resp.GetOperations(), 1)
	assert.Equal(t, "test", resp.GetOperations()[0].GetName())
	assert.Equal(t, "server", resp.GetOperations()[0].GetSpanKind())

	_, err = c.traces.GetOperations(ctxT(t), &storagev2.GetOperationsRequest{Service: "no such mode"})
	assert.Equal(t, codes.InvalidArgument, code(err), "%v", err)
}

func TestFindTraceIDsWithTags(t *testing.T) {
	c := serve(t, frontend.NewEngine(rollout(t), 0, frontend.Config{}))
	resp, err := c.traces.FindTraceIDs(ctxT(t), &storagev2.FindTracesRequest{Query: deploymentQuery("tracing")})
	require.NoError(t, err)
	require.Len(t, resp.GetTraceIds(), 1)
	f := resp.GetTraceIds()[0]
	assert.Equal(t, "ff20", hex.EncodeToString(f.GetTraceId())[:4], "a display ID in the tracing mode")
	assert.False(t, f.GetStart().AsTime().Before(rolloutFrom.Add(-time.Hour)))
	assert.True(t, f.GetEnd().AsTime().After(f.GetStart().AsTime()))

	// The search's attributes narrow it: no object is named like this.
	q := deploymentQuery("tracing")
	q.Attributes[1] = strAttr("name", "no-such-object")
	resp, err = c.traces.FindTraceIDs(ctxT(t), &storagev2.FindTracesRequest{Query: q})
	require.NoError(t, err)
	assert.Empty(t, resp.GetTraceIds())

	// Without attributes every object of the range is a result.
	q.Attributes = nil
	resp, err = c.traces.FindTraceIDs(ctxT(t), &storagev2.FindTracesRequest{Query: q})
	require.NoError(t, err)
	assert.Greater(t, len(resp.GetTraceIds()), 1)
}

// GetTraces draws the same merged tree as the HTTP API's /api/traces/{id}, and FindTraces
// the same as GetTraces of the ID it found.
func TestGetTracesSameSpansAsHTTPAPI(t *testing.T) {
	e := frontend.NewEngine(rollout(t), 0, frontend.Config{})
	c := serve(t, e)
	mux := http.NewServeMux()
	query.NewJaegerAPI(e, telemetry.Settings{}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	for _, mode := range []string{"tracing [full tree]", "tree"} {
		ids, err := c.traces.FindTraceIDs(ctxT(t), &storagev2.FindTracesRequest{Query: deploymentQuery(mode)})
		require.NoError(t, err)
		require.Len(t, ids.GetTraceIds(), 1)
		id := ids.GetTraceIds()[0].GetTraceId()

		stream, err := c.traces.GetTraces(ctxT(t), &storagev2.GetTracesRequest{Query: []*storagev2.GetTraceParams{{TraceId: id}}})
		require.NoError(t, err)
		tds, err := readAll(t, stream)
		require.NoError(t, err)
		require.NotEmpty(t, tds)
		got := spansOf(tds)

		resp, err := http.Get(srv.URL + "/api/traces/" + hex.EncodeToString(id))
		require.NoError(t, err)
		var env struct{ Data []query.JaegerTrace }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&env))
		resp.Body.Close()
		require.Len(t, env.Data, 1)

		var want, have []string
		names := map[string]bool{}
		for _, s := range env.Data[0].Spans {
			want = append(want, s.SpanID)
		}
		for _, s := range got {
			have = append(have, hex.EncodeToString(s.GetSpanId()))
			assert.Equal(t, id, s.GetTraceId())
			for _, kv := range s.GetAttributes() {
				if kv.GetKey() == "resource" || kv.GetKey() == aggregator.AttrResource {
					names[kv.GetValue().GetStringValue()] = true
				}
			}
		}
		slices.Sort(want)
		slices.Sort(have)
		assert.Equal(t, want, have, mode)
		assert.Greater(t, len(have), 1, mode)
		if mode == "tracing [full tree]" {
			assert.True(t, names["deployments"], "the Deployment is in the tree: %v", names)
			assert.True(t, names["replicasets"], "its ReplicaSets are in the tree: %v", names)
			assert.True(t, names["pods"], "their Pods are in the tree: %v", names)
		}

		// Parent links survive: exactly one root.
		roots := 0
		for _, s := range got {
			if len(s.GetParentSpanId()) == 0 {
				roots++
			}
		}
		assert.Equal(t, 1, roots, mode)

		fs, err := c.traces.FindTraces(ctxT(t), &storagev2.FindTracesRequest{Query: deploymentQuery(mode)})
		require.NoError(t, err)
		found, err := readAll(t, fs)
		require.NoError(t, err)
		assert.Len(t, spansOf(found), len(got), mode)
	}

	// Unknown IDs are skipped: an empty stream.
	stream, err := c.traces.GetTraces(ctxT(t), &storagev2.GetTracesRequest{Query: []*storagev2.GetTraceParams{{TraceId: make([]byte, 16)}}})
	require.NoError(t, err)
	tds, err := readAll(t, stream)
	require.NoError(t, err)
	assert.Empty(t, tds)
}

func TestGetDependenciesObjectGraph(t *testing.T) {
	c := serve(t, frontend.NewEngine(rollout(t), 0, frontend.Config{}))
	resp, err := c.deps.GetDependencies(ctxT(t), &storagev2.GetDependenciesRequest{
		StartTime: timestamppb.New(rolloutFrom), EndTime: timestamppb.New(rolloutTo),
	})
	require.NoError(t, err)
	edges := map[string]uint64{}
	for _, d := range resp.GetDependencies() {
		edges[d.GetParent()+" -> "+d.GetChild()] = d.GetCallCount()
	}
	assert.GreaterOrEqual(t, edges["deployments -> replicasets"], uint64(2), "a rollout has an old and a new ReplicaSet: %v", edges)
	assert.GreaterOrEqual(t, edges["replicasets -> pods"], uint64(1), "%v", edges)
	assert.NotContains(t, edges, "pods -> replicasets", "edges point from parent to child")
	t.Logf("dependencies: %v", edges)

	// Nothing happened long before the recording.
	resp, err = c.deps.GetDependencies(ctxT(t), &storagev2.GetDependenciesRequest{
		StartTime: timestamppb.New(rolloutFrom.Add(-72 * time.Hour)), EndTime: timestamppb.New(rolloutFrom.Add(-48 * time.Hour)),
	})
	require.NoError(t, err)
	assert.Empty(t, resp.GetDependencies())
}

func TestBadInputIsInvalidArgument(t *testing.T) {
	c := serve(t, frontend.NewEngine(rollout(t), 0, frontend.Config{}))
	ctx := ctxT(t)

	stream, err := c.traces.GetTraces(ctx, &storagev2.GetTracesRequest{Query: []*storagev2.GetTraceParams{{TraceId: []byte{1, 2, 3}}}})
	require.NoError(t, err)
	_, err = readAll(t, stream)
	assert.Equal(t, codes.InvalidArgument, code(err), "%v", err)

	_, err = c.traces.FindTraceIDs(ctx, &storagev2.FindTracesRequest{})
	assert.Equal(t, codes.InvalidArgument, code(err), "no query: %v", err)

	for name, q := range map[string]*storagev2.TraceQueryParameters{
		"unknown mode": {ServiceName: "no such mode"},
		"array attribute": {ServiceName: "tracing", Attributes: []*storagev2.KeyValue{{Key: "name",
			Value: &storagev2.AnyValue{Value: &storagev2.AnyValue_ArrayValue{ArrayValue: &storagev2.ArrayValue{}}}}}},
		"attribute without value": {ServiceName: "tracing", Attributes: []*storagev2.KeyValue{{Key: "name"}}},
		"end before start":        {ServiceName: "tracing", StartTimeMin: timestamppb.New(rolloutTo), StartTimeMax: timestamppb.New(rolloutFrom)},
		"invalid time":            {ServiceName: "tracing", StartTimeMin: &timestamppb.Timestamp{Nanos: -1}},
	} {
		_, err = c.traces.FindTraceIDs(ctx, &storagev2.FindTracesRequest{Query: q})
		assert.Equal(t, codes.InvalidArgument, code(err), "%s: %v", name, err)
		fs, err := c.traces.FindTraces(ctx, &storagev2.FindTracesRequest{Query: q})
		require.NoError(t, err)
		_, err = readAll(t, fs)
		assert.Equal(t, codes.InvalidArgument, code(err), "%s: %v", name, err)
	}

	_, err = c.deps.GetDependencies(ctx, &storagev2.GetDependenciesRequest{StartTime: timestamppb.New(rolloutTo), EndTime: timestamppb.New(rolloutFrom)})
	assert.Equal(t, codes.InvalidArgument, code(err), "%v", err)
}

// With every turn taken, a heavy request is refused with ResourceExhausted after QueueWait.
func TestConcurrencyLimitIsResourceExhausted(t *testing.T) {
	e := frontend.NewEngine(rollout(t), 0, frontend.Config{MaxConcurrent: 1, QueueWait: 10 * time.Millisecond})
	c := serve(t, e)
	release, err := e.Acquire(context.Background())
	require.NoError(t, err)
	_, err = c.traces.FindTraceIDs(ctxT(t), &storagev2.FindTracesRequest{Query: deploymentQuery("tracing")})
	assert.Equal(t, codes.ResourceExhausted, code(err), "%v", err)
	_, err = c.deps.GetDependencies(ctxT(t), &storagev2.GetDependenciesRequest{})
	assert.Equal(t, codes.ResourceExhausted, code(err), "%v", err)
	release()
	_, err = c.traces.FindTraceIDs(ctxT(t), &storagev2.FindTracesRequest{Query: deploymentQuery("tracing")})
	assert.NoError(t, err)
}

// slowReader answers searches only when the request's context ends.
type slowReader struct{ store.Reader }

func (r slowReader) FindObjects(ctx context.Context, _ store.ObjectQuery) ([]store.ObjectWindows, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// A request that runs out of the frontend's Timeout is DeadlineExceeded, with the reason.
func TestTimeoutIsDeadlineExceeded(t *testing.T) {
	c := serve(t, frontend.NewEngine(slowReader{rollout(t)}, 0, frontend.Config{Timeout: 50 * time.Millisecond}))
	_, err := c.traces.FindTraceIDs(ctxT(t), &storagev2.FindTracesRequest{Query: deploymentQuery("tracing")})
	assert.Equal(t, codes.DeadlineExceeded, code(err), "%v", err)
	assert.Contains(t, status.Convert(err).Message(), "time budget")
	_, err = c.deps.GetDependencies(ctxT(t), &storagev2.GetDependenciesRequest{})
	assert.Equal(t, codes.DeadlineExceeded, code(err), "%v", err)
}

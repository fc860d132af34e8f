package ui_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/event"
	"github.com/kelemetry/kelemetry/frontend"
	"github.com/kelemetry/kelemetry/frontend/ui"
	"github.com/kelemetry/kelemetry/internal/audittest"
	"github.com/kelemetry/kelemetry/internal/benchdata"
	"github.com/kelemetry/kelemetry/internal/frontendtest"
	"github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/store"
	"github.com/kelemetry/kelemetry/store/memory"
	"github.com/kelemetry/kelemetry/telemetry"
)

// The rollout fixture was recorded between 17:00 and 17:11 UTC.
var (
	rolloutFrom = frontendtest.RolloutFrom
	rolloutTo   = frontendtest.RolloutTo
)

// ingestRollout replays testdata/rollout/audit.jsonl through the audit consumer and the
// recorded core/v1 Events through the event converter, into the aggregator (owner and
// annotation linkers) and a memory store.
func ingestRollout(t testing.TB) *memory.Store {
	t.Helper()
	return ingestFiles(t, filepath.Join("..", "..", "testdata", "rollout", "audit.jsonl"), filepath.Join("..", "..", "testdata", "rollout", "events-core-v1.json"))
}

// ingestFiles replays an audit log (plain or gzipped) and, when events is not empty, a recorded
// list of core/v1 Events into the aggregator (owner and annotation linkers) and a memory store.
func ingestFiles(t testing.TB, audit, events string) *memory.Store {
	t.Helper()
	ctx := context.Background()
	st := memory.New(memory.Config{}, 0)
	p, err := audittest.Start(ctx, audittest.Config{
		Deps: aggregator.Deps{
			Sinks:   []aggregator.Sink{st},
			Linkers: frontendtest.Linkers(),
		},
	})
	require.NoError(t, err)
	_, err = p.HandleFile(ctx, audit)
	require.NoError(t, err)
	if events != "" {
		stats, err := event.ReplayFile(ctx, events, event.NewConverter(audittest.DefaultCluster, nil, 0), p.Engine, telemetry.Settings{})
		require.NoError(t, err)
		require.Positive(t, stats.Sent, "recorded Events")
	}
	require.NoError(t, p.Stop(ctx))
	return st
}

// serve builds the HTTP surface the all-in-one serves: native, Jaeger and UI APIs and the UI.
func serve(t testing.TB, r store.Reader, cfg frontend.Config) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	quiet := telemetry.Settings{Logger: slog.New(slog.DiscardHandler)} // the error-state tests fail requests on purpose
	e := frontend.NewEngine(r, 0, cfg)
	query.NewNativeAPI(r, quiet).Register(mux)
	query.NewJaegerAPI(e, quiet).Register(mux)
	query.NewUIAPI(e, quiet).Register(mux)
	ui.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// failingReader is a store whose searches fail, for the UI's error states.
type failingReader struct{ store.Reader }

var errDiskOnFire = errors.New("disk on fire")

func (failingReader) FindObjects(context.Context, store.ObjectQuery) ([]store.ObjectWindows, error) {
	return nil, errDiskOnFire
}

func (failingReader) GetTrace(context.Context, trace.TraceID) ([]*aggregator.Span, error) {
	return nil, errDiskOnFire
}

// getJSON decodes a GET answer's data into v.
func getJSON(t testing.TB, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, u)
	var env struct{ Data json.RawMessage }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&env))
	require.NoError(t, json.Unmarshal(env.Data, v))
}

// searchOne asks the UI's search API for one result and returns its display ID.
func searchOne(t testing.TB, srvURL string, mode string, tags map[string]string, from, to time.Time) query.SearchSummary {
	t.Helper()
	tj, err := json.Marshal(tags)
	require.NoError(t, err)
	q := url.Values{"service": {mode}, "tags": {string(tj)},
		"start": {fmt.Sprint(from.UnixMicro())}, "end": {fmt.Sprint(to.UnixMicro())}}
	var res []query.SearchSummary
	getJSON(t, srvURL+"/api/ui/search?"+q.Encode(), &res)
	require.Len(t, res, 1)
	return res[0]
}

// Synthetic Deployment with many Pods, shaped as the aggregator writes spans.
var synthWindow = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

func synthObj(resource, name string) aggregator.ObjectRef {
	return aggregator.ObjectRef{Cluster: "c", Group: "apps", Version: "v1", Resource: resource, Namespace: "ns", Name: name}
}

type synth struct{ spans []*aggregator.Span }

func (s *synth) object(o aggregator.ObjectRef) {
	s.spans = append(s.spans, benchdata.ObjectSpan(o, synthWindow))
}

func (s *synth) event(o aggregator.ObjectRef, at time.Duration, id string) {
	s.spans = append(s.spans, benchdata.EventSpan(o, synthWindow.Add(at), id))
}

func (s *synth) link(parent, child aggregator.ObjectRef) {
	s.spans = append(s.spans, benchdata.LinkSpans(parent, child, synthWindow, "children")...)
}

// bigDeployment stores a Deployment, one ReplicaSet and pods Pods, each with two events.
func bigDeployment(t testing.TB, pods int) *memory.Store {
	t.Helper()
	var s synth
	dep, rs := synthObj("deployments", "web"), synthObj("replicasets", "web-1")
	s.object(dep)
	s.object(rs)
	s.event(dep, time.Minute, "d")
	s.event(rs, time.Minute+time.Second, "r")
	s.link(dep, rs)
	for i := range pods {
		pod := synthObj("pods", fmt.Sprintf("web-1-%04d", i))
		s.object(pod)
		s.link(rs, pod)
		s.event(pod, 2*time.Minute+time.Duration(i)*time.Millisecond, fmt.Sprintf("a%d", i))
		s.event(pod, 3*time.Minute+time.Duration(i)*time.Millisecond, fmt.Sprintf("b%d", i))
	}
	st := memory.New(memory.Config{}, 0)
	require.NoError(t, st.Export(context.Background(), s.spans))
	return st
}

// rolloutDeploymentID returns the display ID of the rollout Deployment's trace in tracing mode,
// full tree, as the UI's search finds it.
func rolloutDeploymentID(t testing.TB, srvURL string) string {
	t.Helper()
	var sums []query.SearchSummary
	q := url.Values{"service": {"tracing [full tree]"}, "tags": {`{"resource":"deployments","name":"demo"}`},
		"start": {strconv.FormatInt(rolloutFrom.UnixMicro(), 10)}, "end": {strconv.FormatInt(rolloutTo.UnixMicro(), 10)}}
	getJSON(t, srvURL+"/api/ui/search?"+q.Encode(), &sums)
	require.Len(t, sums, 1)
	return sums[0].TraceID
}

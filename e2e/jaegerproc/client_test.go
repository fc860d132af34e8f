package jaegerproc

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"
)

// fakeAPI answers like Jaeger Query and records the requests.
func fakeAPI(t *testing.T) (*httptest.Server, *[]*url.URL) {
	t.Helper()
	var reqs []*url.URL
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqs = append(reqs, r.URL)
		switch r.URL.Path {
		case "/api/services":
			_, _ = w.Write([]byte(`{"data":["tracing","tracing [full tree]"],"total":2,"limit":0,"offset":0,"errors":null}`))
		case "/api/services/tracing [full tree]/operations":
			_, _ = w.Write([]byte(`{"data":["rollout"],"errors":null}`))
		case "/api/traces":
			_, _ = w.Write([]byte(`{"data":[{"traceID":"0a","spans":[{"traceID":"0a","spanID":"01","operationName":"demo",
				"references":[],"tags":[{"key":"resource","type":"string","value":"deployments"}],"processID":"p1"}],
				"processes":{"p1":{"serviceName":"tracing"}}}],"total":0,"errors":null}`))
		case "/api/traces/0a":
			_, _ = w.Write([]byte(`{"data":[{"traceID":"0a","spans":[]}]}`))
		case "/api/dependencies":
			_, _ = w.Write([]byte(`{"data":[{"parent":"deployments","child":"replicasets","callCount":2}]}`))
		default:
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"data":null,"errors":[{"code":500,"msg":"failed to execute GetServices"}]}`))
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &reqs
}

func TestClient(t *testing.T) {
	srv, reqs := fakeAPI(t)
	c := NewClient(srv.URL + "/")
	ctx := t.Context()

	svcs, err := c.Services(ctx)
	if err != nil || !slices.Equal(svcs, []string{"tracing", "tracing [full tree]"}) {
		t.Errorf("Services = %v, %v", svcs, err)
	}
	ops, err := c.Operations(ctx, "tracing [full tree]")
	if err != nil || !slices.Equal(ops, []string{"rollout"}) {
		t.Errorf("Operations = %v, %v", ops, err)
	}

	start := time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC)
	trs, err := c.FindTraces(ctx, TraceQuery{Service: "tracing", Tags: map[string]string{"resource": "deployments", "name": "demo"},
		Start: start, End: start.Add(time.Hour), Limit: 5})
	if err != nil || len(trs) != 1 || trs[0].Spans[0].Tag("resource") != "deployments" || trs[0].Source(trs[0].Spans[0]) != "tracing" {
		t.Errorf("FindTraces = %+v, %v", trs, err)
	}
	q := (*reqs)[len(*reqs)-1].Query()
	var tags map[string]string
	if err := json.Unmarshal([]byte(q.Get("tags")), &tags); err != nil || tags["resource"] != "deployments" || tags["name"] != "demo" {
		t.Errorf("tags parameter %q", q.Get("tags"))
	}
	if q.Get("service") != "tracing" || q.Get("start") != "1795971600000000" || q.Get("end") != "1795975200000000" || q.Get("limit") != "5" || q.Has("operation") {
		t.Errorf("search parameters %v", q)
	}
	if _, err := c.FindTraces(ctx, TraceQuery{}); err == nil {
		t.Error("FindTraces without a service succeeded")
	}

	tr, err := c.Trace(ctx, "0a")
	if err != nil || tr.TraceID != "0a" {
		t.Errorf("Trace = %+v, %v", tr, err)
	}

	deps, err := c.Dependencies(ctx, start.Add(time.Hour), 2*time.Hour)
	if err != nil || len(deps) != 1 || deps[0] != (Dependency{Parent: "deployments", Child: "replicasets", CallCount: 2}) {
		t.Errorf("Dependencies = %+v, %v", deps, err)
	}
	q = (*reqs)[len(*reqs)-1].Query()
	if q.Get("endTs") != "1795975200000" || q.Get("lookback") != "7200000" {
		t.Errorf("dependency parameters %v", q)
	}

	_, err = c.Trace(ctx, "ff")
	var he *HTTPError
	if !errors.As(err, &he) || he.Status != http.StatusInternalServerError || he.Body == "" {
		t.Errorf("Trace of an unknown ID = %v, want an HTTPError 500 with the body", err)
	}
}

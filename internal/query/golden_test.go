package query_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/internal/query"
)

func searchURL(srv string, service string, tags map[string]string) string {
	tj, _ := json.Marshal(tags)
	v := url.Values{
		"service": {service},
		"start":   {strconv.FormatInt(rolloutFrom.UnixMicro(), 10)},
		"end":     {strconv.FormatInt(rolloutTo.UnixMicro(), 10)},
		"limit":   {"20"},
		"tags":    {string(tj)},
	}
	return srv + "/api/traces?" + v.Encode()
}

func fetch(t *testing.T, u string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, body
}

func traces(t *testing.T, u string) []query.JaegerTrace {
	t.Helper()
	code, body := fetch(t, u)
	require.Equal(t, http.StatusOK, code, string(body))
	var resp struct {
		Data []query.JaegerTrace `json:"data"`
	}
	require.NoError(t, json.Unmarshal(body, &resp))
	return resp.Data
}

// TestGoldenModes draws the rollout's Deployment (and one ReplicaSet) in every display mode
// and link mode that the golden files cover.
func TestGoldenModes(t *testing.T) {
	_, srv := newAPI(t, rollout(t))
	dep := map[string]string{"resource": "deployments", "name": "demo"}
	cases := []struct {
		file, service string
		tags          map[string]string
	}{
		{"tracing-fulltree.txt", "tracing [full tree]", dep},
		{"tracing.txt", "tracing", dep},
		{"grouped-fulltree.txt", "grouped [full tree]", dep},
		{"tree-descendants.txt", "tree [descendants]", dep},
		{"timeline-fulltree.txt", "timeline [full tree]", dep},
		{"tracing-ancestors-pod.txt", "tracing [ancestors]", map[string]string{"resource": "pods", "name": "demo-7fb4c846ff-b7qjt"}},
		{"tracing-user.txt", "tracing", map[string]string{"user": "admin", "verb": "delete"}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			u := searchURL(srv.URL, c.service, c.tags)
			got := traces(t, u)
			var b strings.Builder
			for _, tr := range got {
				b.WriteString(renderText(tr))
			}
			golden(t, c.file, b.String())
			_, first := fetch(t, u)
			_, second := fetch(t, u)
			assert.Equal(t, string(first), string(second), "the same query twice is byte-identical")
		})
	}
}

func rootOf(t *testing.T, tr query.JaegerTrace) query.JaegerSpan {
	t.Helper()
	var roots []query.JaegerSpan
	for _, s := range tr.Spans {
		if len(s.References) == 0 {
			roots = append(roots, s)
		}
	}
	require.Len(t, roots, 1, "exactly one root")
	return roots[0]
}

func childrenOf(tr query.JaegerTrace, id string) []query.JaegerSpan {
	var out []query.JaegerSpan
	for _, s := range tr.Spans {
		if len(s.References) > 0 && s.References[0].SpanID == id {
			out = append(out, s)
		}
	}
	return out
}

func tagOf(s query.JaegerSpan, key string) string {
	for _, kv := range s.Tags {
		if kv.Key == key {
			v, _ := kv.Value.(string)
			return v
		}
	}
	return ""
}

func logValues(s query.JaegerSpan, key string) []string {
	var out []string
	for _, l := range s.Logs {
		for _, f := range l.Fields {
			if f.Key == key {
				out = append(out, f.Value.(string))
			}
		}
	}
	return out
}

// TestRolloutAcceptance checks what the "done when" list asks of the rollout fixture.
func TestRolloutAcceptance(t *testing.T) {
	_, srv := newAPI(t, rollout(t))

	full := traces(t, searchURL(srv.URL, "tracing [full tree]", map[string]string{"resource": "deployments", "name": "demo"}))
	require.Len(t, full, 1)
	tr := full[0]
	root := rootOf(t, tr)
	assert.Equal(t, "deployments", tagOf(root, "resource"))
	assert.Equal(t, "demo", tagOf(root, "name"))
	rss := childrenOf(tr, root.SpanID)
	require.Len(t, rss, 2, "one child span per ReplicaSet")
	for _, rs := range rss {
		assert.Equal(t, "replicasets", tagOf(rs, "resource"))
		pods := childrenOf(tr, rs.SpanID)
		assert.Len(t, pods, 4)
		for _, p := range pods {
			assert.Equal(t, "pods", tagOf(p, "resource"))
		}
	}
	audits := logValues(root, "audit")
	assert.Contains(t, audits, "admin create")
	assert.Contains(t, audits, "admin patch scale")
	assert.Contains(t, audits, "system:serviceaccount:kube-system:deployment-controller update status")
	assert.Contains(t, audits, "admin delete")

	// Diffs and snapshots, when the pipeline writes them, are folded in: managed fields hidden,
	// the delete's snapshot is the object.
	for _, d := range logValues(root, "diff") {
		assert.NotContains(t, d, "metadata.managedFields")
	}
	for _, l := range root.Logs {
		var audit, snapshot string
		for _, f := range l.Fields {
			switch f.Key {
			case "audit":
				audit = f.Value.(string)
			case "snapshot":
				snapshot = f.Value.(string)
			}
		}
		if strings.HasSuffix(audit, " delete") && snapshot != "" {
			var o struct {
				Metadata struct{ Name string } `json:"metadata"`
			}
			require.NoError(t, json.Unmarshal([]byte(snapshot), &o))
			assert.Equal(t, "demo", o.Metadata.Name)
		}
	}

	anc := traces(t, searchURL(srv.URL, "tracing [ancestors]", map[string]string{"resource": "replicasets", "name": rss[0].OperationName}))
	require.Len(t, anc, 1)
	root = rootOf(t, anc[0])
	assert.Equal(t, "deployments", tagOf(root, "resource"))
	kids := childrenOf(anc[0], root.SpanID)
	require.Len(t, kids, 1)
	assert.Equal(t, rss[0].OperationName, tagOf(kids[0], "name"))

	// Switching the mode digits of the ID switches the view of the same objects.
	id := tr.TraceID
	require.Len(t, id, 32)
	objects := func(tr query.JaegerTrace) map[string]bool {
		out := map[string]bool{}
		for _, s := range tr.Spans {
			if tagOf(s, "kelemetry.span.kind") == "object" {
				out[tagOf(s, "resource")+"/"+tagOf(s, "name")] = true
			}
		}
		return out
	}
	want := objects(tr)
	require.Len(t, want, 11)
	for _, mode := range []string{"01", "11", "21", "31"} {
		alt := id[:2] + mode + id[4:]
		code, body := fetch(t, srv.URL+"/api/traces/"+alt)
		require.Equal(t, http.StatusOK, code, string(body))
		var resp struct {
			Data []query.JaegerTrace `json:"data"`
		}
		require.NoError(t, json.Unmarshal(body, &resp))
		require.Len(t, resp.Data, 1)
		assert.Equal(t, alt, resp.Data[0].TraceID)
		if mode[0] != '1' { // the timeline keeps only the root object span
			assert.Equal(t, want, objects(resp.Data[0]), mode)
		}
	}
	// The ID resolves with a new API over the same store: no state besides the store.
	api2, _ := newAPI(t, rollout(t))
	parsed, err := query.ParseTraceID(id)
	require.NoError(t, err)
	again, err := api2.Trace(context.Background(), parsed)
	require.NoError(t, err)
	a, _ := json.Marshal(again)
	b, _ := json.Marshal(tr)
	assert.JSONEq(t, string(b), string(a), "the ID shows what the search showed")
}

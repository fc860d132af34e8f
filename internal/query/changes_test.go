package query_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/frontendtest"
	"github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/store"
)

// changesPage is GET /api/changes's answer as a client reads it.
type changesPage struct {
	Data []struct {
		Time   time.Time `json:"time"`
		Object struct {
			Resource, Namespace, Name string
		} `json:"object"`
		User, UserKind, Verb, Subresource, Outcome, Title, TraceID, SpanID string
		Code                                                               int
		Paths, Diff                                                        []string
		Links                                                              struct{ Trace, ObjectAt string }
	} `json:"data"`
	Next    string `json:"next"`
	More    bool   `json:"more"`
	Scanned int    `json:"scanned"`
	Errors  []struct {
		Code int
		Msg  string
	} `json:"errors"`
}

func getChanges(t *testing.T, srv, params string) (int, changesPage) {
	t.Helper()
	resp, err := http.Get(srv + "/api/changes?" + params)
	require.NoError(t, err)
	defer resp.Body.Close()
	var p changesPage
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
	return resp.StatusCode, p
}

func rolloutSince() string { return url.QueryEscape(frontendtest.RolloutFrom.Format(time.RFC3339)) }

// TestChangesAPI: GET /api/changes lists the rollout's writes newest first, filtered, in pages,
// with their changed paths, the diff on request and links to the trace and the object at that
// moment; bad parameters are answered 400 with the reason.
func TestChangesAPI(t *testing.T) {
	srv := newUIAPI(t, rollout(t), query.Config{}).URL
	code, all := getChanges(t, srv, "since="+rolloutSince()+"&limit=5000")
	require.Equal(t, http.StatusOK, code, all.Errors)
	require.Greater(t, len(all.Data), 100)
	assert.False(t, all.More)
	for i := 1; i < len(all.Data); i++ {
		assert.False(t, all.Data[i].Time.After(all.Data[i-1].Time), "newest first")
	}

	// Pages of 40 with the cursor give the same list.
	var paged []string
	cursor := ""
	for range 100 {
		code, p := getChanges(t, srv, "since="+rolloutSince()+"&limit=40&cursor="+cursor)
		require.Equal(t, http.StatusOK, code)
		for _, c := range p.Data {
			paged = append(paged, c.SpanID)
		}
		if !p.More {
			break
		}
		cursor = p.Next
	}
	var want []string
	for _, c := range all.Data {
		want = append(want, c.SpanID)
	}
	assert.Equal(t, want, paged)

	// Filters: admin's writes (a person's, through kubectl), the failed ones, one resource.
	code, persons := getChanges(t, srv, "since="+rolloutSince()+"&userKind=person&diff=1")
	require.Equal(t, http.StatusOK, code)
	require.Len(t, persons.Data, 5, "admin's create, scale, image change, scale and delete")
	for _, c := range persons.Data {
		assert.Equal(t, "admin", c.User)
		assert.Equal(t, "person", c.UserKind)
	}
	image := persons.Data[2] // newest first: delete, scale, image change
	assert.Equal(t, "patch", image.Verb)
	assert.Contains(t, image.Paths, "spec.template.spec.containers[name=alpine].image")
	assert.NotEmpty(t, image.Diff)
	assert.Contains(t, strings.Join(image.Diff, "\n"), "alpine:3.17")
	assert.Contains(t, image.Links.Trace, "/redirect?")
	assert.Contains(t, image.Links.ObjectAt, "/api/objects/test/apps/deployments/default/demo/at?time=")
	// The links work.
	resp, err := http.Get(srv + image.Links.ObjectAt)
	if err == nil {
		resp.Body.Close()
	}

	code, failed := getChanges(t, srv, "since="+rolloutSince()+"&outcome=failed&limit=5000")
	require.Equal(t, http.StatusOK, code)
	require.NotEmpty(t, failed.Data)
	for _, c := range failed.Data {
		assert.GreaterOrEqual(t, c.Code, 300)
		assert.Equal(t, "failed", c.Outcome)
	}
	code, pods := getChanges(t, srv, "since="+rolloutSince()+"&resource=pods&verb=delete,create&limit=5000")
	require.Equal(t, http.StatusOK, code)
	require.NotEmpty(t, pods.Data)
	for _, c := range pods.Data {
		assert.Equal(t, "pods", c.Object.Resource)
		assert.Contains(t, []string{"create", "delete"}, c.Verb)
	}

	for params, msg := range map[string]string{
		"since=yesterday":          `since "yesterday"`,
		"since=15m&verb=get":       `verb "get"`,
		"since=15m&userKind=robot": `userKind "robot"`,
		"since=15m&outcome=maybe":  `outcome "maybe"`,
		"since=15m&limit=0":        `limit "0"`,
		"since=15m&cursor=xyz":     `cursor "xyz"`,
	} {
		code, p := getChanges(t, srv, params)
		assert.Equal(t, http.StatusBadRequest, code, params)
		require.Len(t, p.Errors, 1, params)
		assert.Contains(t, p.Errors[0].Msg, msg)
	}
}

// A store without a change index answers 501.
func TestChangesAPIWithoutIndex(t *testing.T) {
	type plain struct{ store.Reader }
	srv := newUIAPI(t, plain{rollout(t)}, query.Config{}).URL
	code, p := getChanges(t, srv, "since=15m")
	assert.Equal(t, http.StatusNotImplemented, code)
	require.Len(t, p.Errors, 1)
	assert.Contains(t, p.Errors[0].Msg, "keeps no change feed")
}

// TestChangesFollow: the live tail sends the backlog since `since`, then each write as the store
// keeps it, and only those its filters select.
func TestChangesFollow(t *testing.T) {
	st := frontendtest.FreshRollout(t) // written to below
	srv := newUIAPI(t, st, query.Config{}).URL
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv+"/api/changes?follow=1&userKind=person&since="+rolloutSince(), nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	events := make(chan string, 100)
	go func(body io.Reader) {
		sc := bufio.NewScanner(body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events <- data
			}
		}
		close(events)
	}(resp.Body)
	next := func() map[string]any {
		t.Helper()
		select {
		case data := <-events:
			var v map[string]any
			require.NoError(t, json.Unmarshal([]byte(data), &v), data)
			return v
		case <-time.After(5 * time.Second):
			t.Fatal("no event within 5s")
			return nil
		}
	}
	// The backlog, oldest first: admin's five writes.
	var verbs []string
	for range 5 {
		verbs = append(verbs, next()["verb"].(string))
	}
	assert.Equal(t, []string{"create", "patch", "patch", "patch", "delete"}, verbs)

	// A controller's write is filtered out; a person's arrives as it is stored.
	obj := aggregator.ObjectRef{Cluster: "test", Group: "apps", Version: "v1", Resource: "deployments", Namespace: "default", Name: "live"}
	span := func(id byte, user, agent string) *aggregator.Span {
		now := time.Now().UTC()
		return &aggregator.Span{TraceID: trace.TraceID{1, id}, SpanID: trace.SpanID{2, id}, Kind: aggregator.KindEvent, Source: "audit",
			Name: user + " patch", Object: obj, Window: now.Truncate(time.Hour), Start: now, End: now.Add(time.Millisecond),
			Attributes: aggregator.Attrs{{Key: aggregator.AttrVerb, Value: "patch"}, {Key: aggregator.AttrUser, Value: user},
				{Key: aggregator.AttrUserAgent, Value: agent}, {Key: aggregator.AttrStatusCode, Value: "200"}}}
	}
	start := time.Now()
	require.NoError(t, st.Export(ctx, []*aggregator.Span{span(1, "system:serviceaccount:kube-system:deployment-controller", "kube-controller-manager/v1.37.2")}))
	require.NoError(t, st.Export(ctx, []*aggregator.Span{span(2, "alice", "kubectl/v1.37.2 (linux/amd64)")}))
	got := next()
	assert.Equal(t, "alice", got["user"])
	assert.Equal(t, "live", got["object"].(map[string]any)["name"])
	t.Logf("live change after %s", time.Since(start).Round(time.Millisecond))
}

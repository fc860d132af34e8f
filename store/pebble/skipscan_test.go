package pebble

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/store/internal/query"
)

// Searches that fix later fields of the object (resource, namespace, name) and leave earlier ones
// open (cluster, group) skip over the objects between matches: the same objects as testing every
// object, whatever the names (values that are prefixes of one another, characters that sort
// before the separator), and a bounded number of keys read.
func TestFindObjectsSkipScan(t *testing.T) {
	ctx := context.Background()
	p := openTestPebble(t, Config{}, nil)
	rng := rand.New(rand.NewPCG(7, 7))
	pick := func(vals ...string) string { return vals[rng.IntN(len(vals))] }
	var objs []aggregator.ObjectRef
	seen := map[aggregator.ObjectKey]bool{}
	for len(objs) < 600 {
		o := aggregator.ObjectRef{Cluster: pick("a", "a-b", "a.b", "ab", "b"), Group: pick("", "apps", "apps.x", "batch"),
			Version: "v1", Resource: pick("pods", "pods-x", "deployments", "jobs"), Namespace: pick("", "ns", "ns-1", "ns.2", "nsa"),
			Name: pick("web", "web-1", "web.2", "webx", "db")}
		if seen[o.Key()] {
			continue
		}
		seen[o.Key()] = true
		objs = append(objs, o)
	}
	var spans []*aggregator.Span
	for i, o := range objs {
		spans = append(spans, objectSpan(o, t0.Add(time.Duration(i%3)*win)))
	}
	require.NoError(t, p.Export(ctx, spans))

	queries := []query.ObjectQuery{
		{Resource: "pods", Namespace: "ns", Name: "web"},
		{Name: "web"},
		{Namespace: "ns-1"},
		{Group: "apps", Name: "web-1"},
		{Cluster: "a", Resource: "pods-x"},
		{Resource: "jobs", Name: "db"},
		{Cluster: "a-b", Namespace: "nsa", Name: "webx"},
		{Name: "nothing"},
		{Resource: "pods", Namespace: "", Name: "web.2"},
	}
	for i := range 40 {
		queries = append(queries, query.ObjectQuery{Group: pick("", "", "apps", "batch"), Resource: pick("", "pods", "jobs"),
			Namespace: pick("", "ns", "ns-1"), Name: pick("", "web", "web-1", "db"), Limit: 1000 + i})
	}
	for _, q := range queries {
		if q.Limit == 0 {
			q.Limit = 1000
		}
		res, err := p.FindObjects(ctx, q)
		require.NoError(t, err)
		var got, want []string
		for _, r := range res {
			got = append(got, r.Object.Key().String())
		}
		m := query.NewMatcher(q, p.window)
		for _, o := range objs {
			if m.Object(o.Key()) {
				want = append(want, o.Key().String())
			}
		}
		slices.Sort(want)
		slices.Sort(got)
		assert.Equal(t, want, got, "%+v", q)
	}
}

// skipTo never returns a key at or before the object it skips from, and says when nothing more
// can match.
func TestSkipTo(t *testing.T) {
	ref := aggregator.ObjectRef{Cluster: "a", Group: "apps", Resource: "pods", Namespace: "ns", Name: "web"}
	cur := appendObjectString([]byte{prefixObject}, &ref)
	for _, tc := range []struct {
		q    query.ObjectQuery
		want string
		more bool
	}{
		{query.ObjectQuery{Resource: "pods", Namespace: "ns", Name: "x"}, "oa/apps/pods/ns/x\x00", true},
		{query.ObjectQuery{Resource: "pods", Namespace: "ns", Name: "a"}, "oa/apps/pods/ns0", true},
		{query.ObjectQuery{Resource: "zz"}, "oa/apps/zz/", true},
		{query.ObjectQuery{Resource: "jobs"}, "oa/apps0", true},
		{query.ObjectQuery{Group: "apps-x"}, "oa0", true}, // "apps-x/" sorts before "apps/"
		{query.ObjectQuery{Cluster: "a-b"}, "", false},    // "a-b/" sorts before "a/": past it
		{query.ObjectQuery{Cluster: "b"}, "ob/", true},
		{query.ObjectQuery{Exact: true, Cluster: "b"}, "", true},
	} {
		got, more := skipTo(nil, &tc.q, &ref)
		assert.Equal(t, tc.more, more, "%+v", tc.q)
		assert.Equal(t, tc.want, string(got), "%+v", tc.q)
		if got != nil {
			assert.Greater(t, string(got), string(cur))
		}
	}
}

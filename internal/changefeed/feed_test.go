package changefeed

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/diff"
)

func writeSpan(i int, user, agent, verb, code string) *aggregator.Span {
	at := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Millisecond)
	return &aggregator.Span{TraceID: trace.TraceID{9}, SpanID: trace.SpanID{byte(i >> 8), byte(i)}, Kind: aggregator.KindEvent, Source: "audit",
		Name: user + " " + verb, Object: aggregator.ObjectRef{Cluster: "c", Group: "apps", Version: "v1", Resource: "deployments", Namespace: "ns", Name: "web"},
		Window: at.Truncate(time.Hour), Start: at, End: at.Add(3 * time.Millisecond),
		Attributes: aggregator.Attrs{{Key: aggregator.AttrVerb, Value: verb}, {Key: aggregator.AttrUser, Value: user},
			{Key: aggregator.AttrUserAgent, Value: agent}, {Key: aggregator.AttrStatusCode, Value: code}, {Key: aggregator.AttrAuditID, Value: "a1"},
			{Key: aggregator.AttrImpersonator, Value: "bob"}, {Key: aggregator.AttrSubresource, Value: "scale"}},
		Logs: []aggregator.Log{
			{Type: aggregator.LogTypeDiff, Message: "spec.replicas 2 -> 4", Attributes: aggregator.Attrs{{Key: diff.AttrPath, Value: "spec.replicas"}}},
			{Type: aggregator.LogTypeDiff, Message: "metadata.resourceVersion 1 -> 2", Attributes: aggregator.Attrs{{Key: diff.AttrPath, Value: "metadata.resourceVersion"}}},
		}}
}

// A change survives its encoding; reads, objects and Kubernetes Events are no changes.
func TestChangeEncoding(t *testing.T) {
	sp := writeSpan(1, "alice", "kubectl/v1.37.2 (linux/amd64)", "patch", "200")
	c, ok := FromSpan(sp)
	require.True(t, ok)
	assert.Equal(t, []string{"spec.replicas"}, c.Paths, "bookkeeping fields left out")
	assert.Equal(t, KindPerson, c.UserKind())
	assert.Equal(t, "bob", c.Impersonator)
	assert.Equal(t, []string{"spec.replicas 2 -> 4", "metadata.resourceVersion 1 -> 2"}, c.Diff)
	got, err := Decode(Append(nil, &c), c.Time, c.SpanID)
	require.NoError(t, err)
	c.Diff = nil // not kept in the index
	assert.Equal(t, c, got)
	_, err = Decode(Append(nil, &c)[:20], c.Time, c.SpanID)
	assert.Error(t, err)

	for _, mutate := range []func(*aggregator.Span){
		func(s *aggregator.Span) { s.Attributes[0].Value = "get" },
		func(s *aggregator.Span) { s.Kind = aggregator.KindObject },
		func(s *aggregator.Span) { s.Source = "event" },
	} {
		s := writeSpan(2, "alice", "kubectl", "patch", "200")
		mutate(s)
		_, ok := FromSpan(s)
		assert.False(t, ok)
	}
	assert.Equal(t, KindNode, UserKind("system:node:n1", "kubelet/v1.37"))
	assert.Equal(t, KindController, UserKind("system:serviceaccount:kube-system:x", "kubectl/v1"))
	assert.Equal(t, KindController, UserKind("ci-bot", "Go-http-client/1.1"))

	cur := Cursor{Time: c.Time, SpanID: c.SpanID}
	back, err := ParseCursor(cur.String())
	require.NoError(t, err)
	assert.Equal(t, cur, back)
	_, err = ParseCursor("nope")
	assert.Error(t, err)
}

// A live tail gets what its filters select, in order; one that falls behind is cut off without
// slowing the publisher, and counted.
func TestFeedFollow(t *testing.T) {
	f := NewFeed(func(context.Context, Query) (Page, error) { return Page{}, nil }).WithLimits(2, 3)
	people, err := f.Follow(Query{UserKinds: []string{KindPerson}})
	require.NoError(t, err)
	slow, err := f.Follow(Query{})
	require.NoError(t, err)
	_, err = f.Follow(Query{})
	require.ErrorIs(t, err, ErrTooManyFollowers)
	_, err = f.Follow(Query{Verbs: []string{"get"}})
	require.Error(t, err)

	var spans []*aggregator.Span
	for i := range 10 {
		user, agent := "system:serviceaccount:kube-system:deployment-controller", "kube-controller-manager/v1.37.2"
		if i%4 == 0 {
			user, agent = "alice", "kubectl/v1.37.2"
		}
		spans = append(spans, writeSpan(i, user, agent, "patch", "200"))
	}
	done := make(chan struct{})
	go func() { f.Publish(spans); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Publish blocked on a slow tail")
	}
	var got []byte
	for range 3 {
		c := <-people.C
		got = append(got, c.SpanID[1])
	}
	assert.Equal(t, []byte{0, 4, 8}, got, "alice's writes, in order")
	<-slow.Done
	assert.True(t, slow.CutOff())
	assert.False(t, people.CutOff())
	assert.EqualValues(t, 1, f.CutOff())
	assert.Equal(t, 1, f.Followers())
	people.Close()
	people.Close()
	assert.Equal(t, 0, f.Followers())
}

// DecodeMatching skips exactly the changes Query.Match refuses.
func TestDecodeMatchingAgreesWithMatch(t *testing.T) {
	var cs []Change
	for i, u := range [][3]string{{"alice", "kubectl/v1.37.2", "200"}, {"system:node:n1", "kubelet/v1.37", "409"},
		{"system:serviceaccount:kube-system:rs", "kube-controller-manager/v1.37.2", "201"}} {
		c, ok := FromSpan(writeSpan(i, u[0], u[1], "patch", u[2]))
		require.True(t, ok)
		cs = append(cs, c)
	}
	queries := []Query{{}, {Cluster: "c"}, {Cluster: "d"}, {Group: "apps", Resource: "deployments"}, {Resource: "pods"},
		{Namespace: "ns", Name: "web"}, {Name: "other"}, {User: "alice"}, {User: "bob"}, {User: "carol"},
		{Verbs: []string{"patch"}}, {Verbs: []string{"create", "delete"}}, {Outcome: OutcomeOK}, {Outcome: OutcomeFailed},
		{UserKinds: []string{KindPerson}}, {UserKinds: []string{KindNode, KindController}}}
	for _, q := range queries {
		for i := range cs {
			c := cs[i]
			v := Append(nil, &c)
			got, err := DecodeMatching(v, c.Time, c.SpanID, &q)
			if q.Match(&c) {
				require.NoError(t, err, "%+v", q)
				c.Diff = nil
				assert.Equal(t, c, got)
			} else {
				assert.ErrorIs(t, err, ErrSkip, "%+v on %s", q, c.User)
			}
		}
	}
}

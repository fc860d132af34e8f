package query_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/query"
)

// causalGraph builds a graph by hand: objects with their events, and parent -> child edges.
type causalGraph struct {
	g *query.Graph
	n int
}

func newCausalGraph() *causalGraph {
	return &causalGraph{g: &query.Graph{Objects: map[aggregator.ObjectKey]*query.Object{},
		Children: map[aggregator.ObjectKey][]query.Edge{}}}
}

func ckey(resource, name string) aggregator.ObjectKey {
	return aggregator.ObjectKey{Cluster: "c", Resource: resource, Namespace: "ns", Name: name}
}

func (c *causalGraph) object(k aggregator.ObjectKey, parent *aggregator.ObjectKey) {
	c.g.Objects[k] = &query.Object{Key: k, Ref: aggregator.ObjectRef{Cluster: k.Cluster, Resource: k.Resource, Namespace: k.Namespace, Name: k.Name}}
	if parent == nil {
		c.g.Roots = append(c.g.Roots, k)
		return
	}
	c.g.Children[*parent] = append(c.g.Children[*parent], query.Edge{Parent: *parent, Child: k})
}

// write adds a write of user at offset at (ms) lasting 5ms, changing fields.
func (c *causalGraph) write(k aggregator.ObjectKey, at int, user, verb, sub string, fields ...string) *aggregator.Span {
	c.n++
	start := time.Unix(1000, 0).Add(time.Duration(at) * time.Millisecond)
	sp := &aggregator.Span{Kind: aggregator.KindEvent, Source: "audit", Name: user + " " + verb, Start: start, End: start.Add(5 * time.Millisecond),
		Attributes: aggregator.Attrs{{Key: aggregator.AttrUser, Value: user}, {Key: aggregator.AttrVerb, Value: verb}}}
	sp.SpanID[7] = byte(c.n)
	sp.SpanID[6] = byte(c.n >> 8)
	sp.SpanID[5] = byte(c.n >> 16)
	if sub != "" {
		sp.Attributes = append(sp.Attributes, aggregator.Attr{Key: aggregator.AttrSubresource, Value: sub})
	}
	for _, f := range fields {
		sp.Logs = append(sp.Logs, aggregator.Log{Time: start, Type: aggregator.LogTypeDiff, Message: f + " a -> b",
			Attributes: aggregator.Attrs{{Key: "kelemetry.diff.path", Value: f}}})
	}
	o := c.g.Objects[k]
	o.Events = append(o.Events, sp)
	return sp
}

const (
	depCtl = "system:serviceaccount:kube-system:deployment-controller"
	rsCtl  = "system:serviceaccount:kube-system:replicaset-controller"
)

// TestAnalyzeCriticalRules: a rule's field condition skips a write that did not change the
// field; failed requests and reads take no part; a write no rule covers follows the latest
// write of a linked object; a write with nothing linked before it is tied to the root's first.
func TestAnalyzeCriticalRules(t *testing.T) {
	build := func() (*causalGraph, []*aggregator.Span) {
		c := newCausalGraph()
		dep, rs, pod := ckey("deployments", "d"), ckey("replicasets", "d-1"), ckey("pods", "d-1-a")
		c.object(dep, nil)
		c.object(rs, &dep)
		c.object(pod, &rs)
		create := c.write(dep, 0, "admin", "create", "")
		c.write(dep, 100, "admin", "update", "", "metadata.labels") // not a spec change
		failed := c.write(dep, 150, "admin", "patch", "", "spec.replicas")
		failed.Error = true
		c.write(dep, 160, "admin", "get", "")
		rsCreate := c.write(rs, 200, depCtl, "create", "")
		podCreate := c.write(pod, 300, rsCtl, "create", "")
		label := c.write(pod, 400, "alice", "patch", "", "metadata.labels")
		return c, []*aggregator.Span{create, rsCreate, podCreate, label}
	}
	type step struct {
		span       string
		controller string
		rule       string
		wait       float64
	}
	got := func(cp query.CriticalPath) []step {
		var out []step
		for _, s := range cp.Steps {
			out = append(out, step{s.SpanID, s.Controller, s.Rule, float64(time.Duration(s.WaitSeconds*1e9).Round(time.Millisecond)) / 1e9})
		}
		return out
	}

	t.Run("rules and linked fallback", func(t *testing.T) {
		c, sp := build()
		cp := query.AnalyzeCritical(c.g, "id", nil)
		assert.Equal(t, []step{
			{sp[0].SpanID.String(), "admin", "start", 0},
			// From the create's end: the labels update changed no spec, the patch failed.
			{sp[1].SpanID.String(), "deployment-controller", "deployment-spec", 0.195},
			{sp[2].SpanID.String(), "replicaset-controller", "replicaset-spec", 0.095},
			// No rule for alice: the latest write of a linked object (the Pod's creation).
			{sp[3].SpanID.String(), "alice", "linked", 0.095},
		}, got(cp))
		assert.InDelta(t, 0.405, cp.DurationSeconds, 1e-9)
		require.NotEmpty(t, cp.Waits)
		assert.Equal(t, "deployment-controller", cp.Waits[0].Controller, "longest wait first")
		times := map[string]query.ControllerTimes{}
		for _, ct := range cp.Controllers {
			times[ct.Controller] = ct
		}
		assert.Equal(t, 2, times["admin"].Writes, "the failed patch and the get take no part")
		assert.Equal(t, 1, times["admin"].Reactions, "the labels update follows the create")
		assert.Equal(t, []string{depCtl}, times["deployment-controller"].Users)
	})

	t.Run("unexplained", func(t *testing.T) {
		// A write of an unrelated object after the root's: nothing explains it, so there is no
		// chain and no critical path is invented; the reaction times stay.
		c, _ := build()
		other := ckey("configmaps", "x")
		c.object(other, nil)
		c.write(other, 900, "bob", "update", "")
		cp := query.AnalyzeCritical(c.g, "id", nil)
		assert.Empty(t, cp.Steps)
		assert.Contains(t, cp.NoPath, "no chain of reactions explains the time")
		assert.Nil(t, cp.Slowest)
		assert.NotEmpty(t, cp.Controllers)
	})

	t.Run("custom rules", func(t *testing.T) {
		c, sp := build()
		// Without rules (an empty table, not nil) every step follows the latest write of a
		// linked object: the RS's creation follows the labels update now.
		cp := query.AnalyzeCritical(c.g, "id", []query.CausalRule{})
		steps := got(cp)
		require.Len(t, steps, 5)
		assert.Equal(t, "linked", steps[1].rule)
		assert.Equal(t, step{sp[1].SpanID.String(), "deployment-controller", "linked", 0.095}, steps[2])
	})

	t.Run("nothing to analyse", func(t *testing.T) {
		cp := query.AnalyzeCritical(newCausalGraph().g, "id", nil)
		assert.Empty(t, cp.Steps)
		assert.NotNil(t, cp.Steps, "an empty list, not null")
		c := newCausalGraph()
		k := ckey("pods", "p")
		c.object(k, nil)
		c.write(k, 0, "", "get", "")
		cp = query.AnalyzeCritical(c.g, "id", nil)
		assert.Empty(t, cp.Steps)
	})
}

// BenchmarkCriticalPath100kWrites analyses a ReplicaSet with 1,000 Pods of 100 status writes
// each, the ReplicaSet's status written after every tenth Pod write.
func BenchmarkCriticalPath100kWrites(b *testing.B) {
	c := newCausalGraph()
	dep, rs := ckey("deployments", "d"), ckey("replicasets", "d-1")
	c.object(dep, nil)
	c.object(rs, &dep)
	c.write(dep, 0, "admin", "create", "")
	c.write(rs, 1, depCtl, "create", "")
	at := 2
	for p := range 1000 {
		pod := ckey("pods", fmt.Sprintf("d-1-%04d", p))
		c.object(pod, &rs)
		c.write(pod, at, rsCtl, "create", "")
		at++
	}
	for e := range 100 {
		for p := range 1000 {
			c.write(ckey("pods", fmt.Sprintf("d-1-%04d", p)), at, "system:node:n", "patch", "status", "status.conditions")
			at++
			if p%10 == 0 {
				c.write(rs, at, rsCtl, "update", "status", "status.readyReplicas")
				at++
			}
		}
		_ = e
	}
	b.ReportAllocs()
	for b.Loop() {
		cp := query.AnalyzeCritical(c.g, "id", nil)
		if len(cp.Steps) == 0 {
			b.Fatal("no path")
		}
	}
}

// TestAnalyzeCriticalOddTimes: a write stored without an end time, or with an end before its
// start (clock skew between the API server's stages), ends when it starts: the next step's
// wait is measured from its start, not from year 1 (a wait of centuries), and no time in the
// answer is the zero time.
func TestAnalyzeCriticalOddTimes(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(start time.Time) time.Time
	}{
		{"no end", func(time.Time) time.Time { return time.Time{} }},
		{"end before start", func(start time.Time) time.Time { return start.Add(-time.Hour) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCausalGraph()
			dep, rs := ckey("deployments", "d"), ckey("replicasets", "d-1")
			c.object(dep, nil)
			c.object(rs, &dep)
			create := c.write(dep, 0, "admin", "create", "")
			create.End = tc.end(create.Start)
			rsCreate := c.write(rs, 200, depCtl, "create", "")
			cp := query.AnalyzeCritical(c.g, "id", nil)
			require.Len(t, cp.Steps, 2)
			assert.Equal(t, rsCreate.SpanID.String(), cp.Steps[1].SpanID)
			assert.InDelta(t, 0.2, cp.Steps[1].WaitSeconds, 1e-9, "waited from the cause's start")
			assert.Zero(t, cp.Steps[0].ActSeconds)
			assert.Equal(t, create.Start.UTC(), cp.Steps[0].End, "ends when it starts")
			assert.InDelta(t, 0.205, cp.DurationSeconds, 1e-9)
			for _, ct := range cp.Controllers {
				assert.LessOrEqual(t, ct.MaxWaitSeconds, 0.2+1e-9, ct.Controller)
			}

			// Alone, such a write is the whole path and the answer ends when it starts.
			c = newCausalGraph()
			c.object(dep, nil)
			only := c.write(dep, 0, "admin", "create", "")
			only.End = tc.end(only.Start)
			cp = query.AnalyzeCritical(c.g, "id", nil)
			require.Len(t, cp.Steps, 1)
			assert.Equal(t, only.Start.UTC(), cp.End)
			assert.Equal(t, only.Start.UTC(), cp.Steps[0].End)
		})
	}
}

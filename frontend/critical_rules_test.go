package frontend_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/frontend"
)

// causalGraph builds a graph by hand: objects with their events, and parent -> child edges.
type causalGraph struct {
	g *frontend.Graph
	n int
}

func newCausalGraph() *causalGraph {
	return &causalGraph{g: &frontend.Graph{Objects: map[aggregator.ObjectKey]*frontend.Object{},
		Children: map[aggregator.ObjectKey][]frontend.Edge{}}}
}

func ckey(resource, name string) aggregator.ObjectKey {
	return aggregator.ObjectKey{Cluster: "c", Resource: resource, Namespace: "ns", Name: name}
}

func (c *causalGraph) object(k aggregator.ObjectKey, parent *aggregator.ObjectKey) {
	c.g.Objects[k] = &frontend.Object{Key: k, Ref: aggregator.ObjectRef{Cluster: k.Cluster, Resource: k.Resource, Namespace: k.Namespace, Name: k.Name}}
	if parent == nil {
		c.g.Roots = append(c.g.Roots, k)
		return
	}
	c.g.Children[*parent] = append(c.g.Children[*parent], frontend.Edge{Parent: *parent, Child: k})
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
	got := func(cp frontend.CriticalPath) []step {
		var out []step
		for _, s := range cp.Steps {
			out = append(out, step{s.SpanID, s.Controller, s.Rule, float64(time.Duration(s.WaitSeconds*1e9).Round(time.Millisecond)) / 1e9})
		}
		return out
	}

	t.Run("rules and linked fallback", func(t *testing.T) {
		c, sp := build()
		cp := frontend.AnalyzeCritical(c.g, "id", nil)
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
		times := map[string]frontend.ControllerTimes{}
		for _, ct := range cp.Controllers {
			times[ct.Controller] = ct
		}
		assert.Equal(t, 2, times["admin"].Writes, "the failed patch and the get take no part")
		assert.Equal(t, 1, times["admin"].Reactions, "the labels update follows the create")
		assert.Equal(t, []string{depCtl}, times["deployment-controller"].Users)
	})

	t.Run("unexplained", func(t *testing.T) {
		c, sp := build()
		other := ckey("configmaps", "x")
		c.object(other, nil)
		last := c.write(other, 900, "bob", "update", "")
		cp := frontend.AnalyzeCritical(c.g, "id", nil)
		assert.Equal(t, []step{
			{sp[0].SpanID.String(), "admin", "start", 0},
			{last.SpanID.String(), "bob", "unexplained", 0.895},
		}, got(cp))
	})

	t.Run("custom rules", func(t *testing.T) {
		c, sp := build()
		// Without rules (an empty table, not nil) every step follows the latest write of a
		// linked object: the RS's creation follows the labels update now.
		cp := frontend.AnalyzeCritical(c.g, "id", []frontend.CausalRule{})
		steps := got(cp)
		require.Len(t, steps, 5)
		assert.Equal(t, "linked", steps[1].rule)
		assert.Equal(t, step{sp[1].SpanID.String(), "deployment-controller", "linked", 0.095}, steps[2])
	})

	t.Run("nothing to analyse", func(t *testing.T) {
		cp := frontend.AnalyzeCritical(newCausalGraph().g, "id", nil)
		assert.Empty(t, cp.Steps)
		assert.NotNil(t, cp.Steps, "an empty list, not null")
		c := newCausalGraph()
		k := ckey("pods", "p")
		c.object(k, nil)
		c.write(k, 0, "", "get", "")
		cp = frontend.AnalyzeCritical(c.g, "id", nil)
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
		cp := frontend.AnalyzeCritical(c.g, "id", nil)
		if len(cp.Steps) == 0 {
			b.Fatal("no path")
		}
	}
}

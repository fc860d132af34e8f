package query_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/query"
)

const (
	gcCtl     = "system:serviceaccount:kube-system:generic-garbage-collector"
	scheduler = "system:kube-scheduler"
	kubelet   = "system:node:n1"
)

// TestDefaultCausalRulesByName: each rule of DefaultCausalRules is, by name, the one that ties a
// crafted reaction to its cause. Every case has a distractor: a write of a linked object between
// the cause and the reaction that the rule does not accept, so the linked fallback would pick
// it; the step must follow the rule's cause instead, and wait from that cause's end.
func TestDefaultCausalRulesByName(t *testing.T) {
	dep, rs, pod := ckey("deployments", "d"), ckey("replicasets", "d-1"), ckey("pods", "d-1-a")
	// Each case builds its graph and returns the cause and the reaction, the last write.
	cases := map[string]func(c *causalGraph) (cause, reaction *aggregator.Span){
		"deployment-spec": func(c *causalGraph) (*aggregator.Span, *aggregator.Span) {
			c.object(dep, nil)
			c.object(rs, &dep)
			c.write(dep, 0, "admin", "create", "")
			cause := c.write(dep, 100, "admin", "patch", "scale", "spec.replicas")
			c.write(dep, 150, "admin", "update", "", "metadata.labels") // not spec
			return cause, c.write(rs, 200, depCtl, "update", "", "spec.replicas")
		},
		"deployment-rollout": func(c *causalGraph) (*aggregator.Span, *aggregator.Span) {
			old, cur := ckey("replicasets", "d-1"), ckey("replicasets", "d-2")
			c.object(dep, nil)
			c.object(old, &dep)
			c.object(cur, &dep)
			c.write(old, 0, depCtl, "create", "")
			cause := c.write(cur, 100, rsCtl, "update", "status", "status.availableReplicas") // the new Pods available
			c.write(old, 150, "alice", "patch", "", "metadata.labels")                        // not a status
			return cause, c.write(old, 200, depCtl, "update", "", "spec.replicas")
		},
		"replicaset-spec": func(c *causalGraph) (*aggregator.Span, *aggregator.Span) {
			c.object(rs, nil)
			c.object(pod, &rs)
			cause := c.write(rs, 0, depCtl, "create", "")
			c.write(rs, 150, rsCtl, "update", "status", "status.replicas") // the status, not spec
			return cause, c.write(pod, 200, rsCtl, "create", "")
		},
		"schedule": func(c *causalGraph) (*aggregator.Span, *aggregator.Span) {
			c.object(pod, nil)
			cause := c.write(pod, 0, rsCtl, "create", "")
			c.write(pod, 150, "alice", "patch", "", "metadata.labels")
			return cause, c.write(pod, 200, scheduler, "create", "binding", "spec.nodeName")
		},
		"pod-start": func(c *causalGraph) (*aggregator.Span, *aggregator.Span) {
			c.object(pod, nil)
			c.write(pod, 0, rsCtl, "create", "")
			cause := c.write(pod, 100, scheduler, "create", "binding", "spec.nodeName")
			c.write(pod, 150, "alice", "patch", "", "metadata.labels")
			return cause, c.write(pod, 200, kubelet, "patch", "status", "status.phase")
		},
		"pod-terminate": func(c *causalGraph) (*aggregator.Span, *aggregator.Span) {
			c.object(pod, nil)
			c.write(pod, 0, rsCtl, "create", "")
			cause := c.write(pod, 100, rsCtl, "delete", "", "metadata.deletionTimestamp")
			c.write(pod, 150, kubelet, "patch", "status", "status.phase") // not a delete
			return cause, c.write(pod, 200, kubelet, "delete", "")
		},
		"replicaset-status": func(c *causalGraph) (*aggregator.Span, *aggregator.Span) {
			c.object(rs, nil)
			c.object(pod, &rs)
			c.write(rs, 0, depCtl, "create", "")
			cause := c.write(pod, 100, kubelet, "patch", "status", "status.phase")
			c.write(rs, 150, depCtl, "update", "", "metadata.annotations") // the RS itself, not a child
			return cause, c.write(rs, 200, rsCtl, "update", "status", "status.readyReplicas")
		},
		"deployment-status": func(c *causalGraph) (*aggregator.Span, *aggregator.Span) {
			c.object(dep, nil)
			c.object(rs, &dep)
			c.write(dep, 0, "admin", "create", "")
			cause := c.write(rs, 100, rsCtl, "update", "status", "status.readyReplicas")
			c.write(dep, 150, "admin", "patch", "", "metadata.labels") // the Deployment itself
			return cause, c.write(dep, 200, depCtl, "update", "status", "status.readyReplicas")
		},
		"garbage-collect": func(c *causalGraph) (*aggregator.Span, *aggregator.Span) {
			c.object(rs, nil)
			c.object(pod, &rs)
			c.write(rs, 0, depCtl, "create", "")
			cause := c.write(rs, 100, "admin", "delete", "")
			c.write(pod, 150, kubelet, "patch", "status", "status.phase") // the Pod itself
			return cause, c.write(pod, 200, gcCtl, "delete", "")
		},
	}
	require.NoError(t, query.ValidateCausalRules(query.DefaultCausalRules))
	for _, r := range query.DefaultCausalRules {
		assert.Contains(t, cases, r.Name, "default rule %q has a case here", r.Name)
	}
	for name, build := range cases {
		t.Run(name, func(t *testing.T) {
			c := newCausalGraph()
			cause, reaction := build(c)
			cp := query.AnalyzeCritical(c.g, "id", nil)
			require.GreaterOrEqual(t, len(cp.Steps), 2)
			last, prev := cp.Steps[len(cp.Steps)-1], cp.Steps[len(cp.Steps)-2]
			assert.Equal(t, reaction.SpanID.String(), last.SpanID, "the reaction ends the path")
			assert.Equal(t, name, last.Rule)
			assert.Equal(t, cause.SpanID.String(), prev.SpanID, "the rule's cause, not the distractor")
			assert.InDelta(t, reaction.Start.Sub(cause.End).Seconds(), last.WaitSeconds, 1e-9)

			// Without the rule, the same reaction follows the distractor (the linked fallback).
			var others []query.CausalRule
			for _, r := range query.DefaultCausalRules {
				if r.Name != name {
					others = append(others, r)
				}
			}
			cp = query.AnalyzeCritical(c.g, "id", others)
			require.GreaterOrEqual(t, len(cp.Steps), 2)
			last, prev = cp.Steps[len(cp.Steps)-1], cp.Steps[len(cp.Steps)-2]
			assert.Equal(t, "linked", last.Rule)
			assert.NotEqual(t, cause.SpanID.String(), prev.SpanID)
		})
	}
}

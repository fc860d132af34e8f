package linkrule

import (
	"fmt"
	"testing"
)

const benchPod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-0","namespace":"shop","uid":"u1","labels":{"app":"web","tier":"front"},
"annotations":{"a":"b"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-5d9","uid":"u2","controller":true}]},
"spec":{"volumes":[{"name":"tls","secret":{"secretName":"web-tls"}},{"name":"conf","configMap":{"name":"web-conf"}},
{"name":"kube-api-access","projected":{"sources":[{"serviceAccountToken":{"path":"token"}},{"configMap":{"name":"kube-root-ca.crt"}}]}}],
"containers":[{"name":"web","image":"nginx","env":[{"name":"PASS","valueFrom":{"secretKeyRef":{"name":"db","key":"pass"}}}],
"resources":{"limits":{"cpu":"1","memory":"1Gi"}}}],"nodeName":"node-1","serviceAccountName":"web"},
"status":{"phase":"Running","podIP":"10.0.0.1","conditions":[{"type":"Ready","status":"True"}]}}`

// benchRules returns n rules on pods, each with a condition and a list-valued name target.
func benchRules(b *testing.B, n int, resource func(i int) string) []*Rule {
	rules := make([]*Rule, n)
	for i := range rules {
		rules[i] = mustCompile(b, rule(fmt.Sprintf("r%02d", i), func(s *Spec) {
			s.Source.Resources = []GroupResource{{Resource: resource(i)}}
			s.Source.Condition = fmt.Sprintf("object.metadata.?labels.app.orValue('') == 'web' && %d >= 0", i)
			s.Targets[0].Name = "object.spec.?volumes.orValue([]).filter(v, has(v.secret)).map(v, v.secret.secretName)"
		}))
	}
	return rules
}

// BenchmarkLookup50Rules evaluates 50 rules that all select the object (condition and a
// list-valued target each), the body decoded once.
func BenchmarkLookup50Rules(b *testing.B) {
	l := newLinker(nil, nil, silent)
	l.Replace(setDir, benchRules(b, 50, func(int) string { return "pods" }))
	pod := obj("", "pods", "shop", "web-0", benchPod)
	b.ReportAllocs()
	for b.Loop() {
		links, err := l.Lookup(b.Context(), pod)
		if err != nil || len(links) != 1 {
			b.Fatalf("links %v, err %v", links, err)
		}
	}
}

// BenchmarkLookup50RulesIndexed has 50 rules of which 2 select the object's resource: the
// index skips the other 48 without decoding anything for them.
func BenchmarkLookup50RulesIndexed(b *testing.B) {
	l := newLinker(nil, nil, silent)
	l.Replace(setDir, benchRules(b, 50, func(i int) string {
		if i%25 == 0 {
			return "pods"
		}
		return fmt.Sprintf("things%d", i)
	}))
	pod := obj("", "pods", "shop", "web-0", benchPod)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Lookup(b.Context(), pod); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLookupNoRuleSelects is the cost for an object of a resource no rule selects.
func BenchmarkLookupNoRuleSelects(b *testing.B) {
	l := newLinker(nil, nil, silent)
	l.Replace(setDir, benchRules(b, 50, func(int) string { return "pods" }))
	dep := obj("apps", "deployments", "shop", "web", benchPod)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Lookup(b.Context(), dep); err != nil {
			b.Fatal(err)
		}
	}
}

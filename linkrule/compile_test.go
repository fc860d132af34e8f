package linkrule

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
)

// rule builds a LinkRule on pods with one name target of secrets.
func rule(name string, mutate func(s *Spec)) LinkRule {
	lr := LinkRule{
		TypeMeta:   metav1.TypeMeta{APIVersion: APIVersion, Kind: Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: Spec{
			Source:  Source{Resources: []GroupResource{{Group: "", Resource: "pods"}}},
			Role:    "parent",
			Class:   "volumes",
			Targets: []Target{{Version: "v1", Resource: "secrets", Name: "object.spec.secretName"}},
		},
	}
	if mutate != nil {
		mutate(&lr.Spec)
	}
	return lr
}

func TestCompileRejects(t *testing.T) {
	long := strings.Repeat("x", maxExpressionLength+1)
	tests := []struct {
		name    string
		mutate  func(s *Spec)
		noName  bool
		wantErr string
	}{
		{name: "no name", noName: true, wantErr: "metadata.name is required"},
		{name: "bad role", mutate: func(s *Spec) { s.Role = "sibling" }, wantErr: `spec.role must be "parent" or "child", not "sibling"`},
		{name: "no resources", mutate: func(s *Spec) { s.Source.Resources = nil }, wantErr: "spec.source.resources needs at least one entry"},
		{name: "empty resource", mutate: func(s *Spec) { s.Source.Resources = []GroupResource{{Group: "apps"}} }, wantErr: "spec.source.resources[0].resource is required"},
		{name: "bad label selector", mutate: func(s *Spec) {
			s.Source.LabelSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}
		}, wantErr: "spec.source.labelSelector"},
		{name: "condition syntax", mutate: func(s *Spec) { s.Source.Condition = "object.metadata.name ==" }, wantErr: "spec.source.condition: compile"},
		{name: "condition type", mutate: func(s *Spec) { s.Source.Condition = "'yes'" }, wantErr: "has type string, want bool"},
		{name: "unknown variable", mutate: func(s *Spec) { s.Source.Condition = "request.user == 'x'" }, wantErr: "undeclared reference to 'request'"},
		{name: "unknown function", mutate: func(s *Spec) { s.Targets[0].Name = "frobnicate(object)" }, wantErr: "spec.targets[0].name: compile"},
		{name: "name type", mutate: func(s *Spec) { s.Targets[0].Name = "1 + 2" }, wantErr: "has type int, want string or list(string)"},
		{name: "namespace type", mutate: func(s *Spec) { s.Targets[0].Namespace = "[1]" }, wantErr: "spec.targets[0].namespace"},
		{name: "selector type", mutate: func(s *Spec) {
			s.Targets[0].Name, s.Targets[0].Selector = "", "true"
		}, wantErr: "spec.targets[0].selector"},
		{name: "no targets", mutate: func(s *Spec) { s.Targets = nil }, wantErr: "spec.targets needs 1 to 16 entries, has 0"},
		{name: "too many targets", mutate: func(s *Spec) { s.Targets = make([]Target, maxTargets+1) }, wantErr: "has 17"},
		{name: "target without resource", mutate: func(s *Spec) { s.Targets[0].Resource = "" }, wantErr: "spec.targets[0].resource: required"},
		{name: "name and selector", mutate: func(s *Spec) { s.Targets[0].Selector = "object.spec.selector" }, wantErr: "exactly one is required"},
		{name: "neither name nor selector", mutate: func(s *Spec) { s.Targets[0].Name = "" }, wantErr: "exactly one is required"},
		{name: "selector without version", mutate: func(s *Spec) {
			s.Targets[0] = Target{Resource: "pods", Selector: "object.spec.selector"}
		}, wantErr: "version: required with selector"},
		{name: "too long", mutate: func(s *Spec) { s.Targets[0].Name = long }, wantErr: "longer than 4096"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lr := rule("r", tt.mutate)
			if tt.noName {
				lr.Name = ""
			}
			_, err := Compile(lr, "test", CompileOptions{})
			require.Error(t, err)
			assert.ErrorIs(t, err, errInvalidRule)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func obj(group, resource, ns, name, body string) aggregator.Object {
	return aggregator.Object{
		ObjectRef: aggregator.ObjectRef{Cluster: "c1", Group: group, Version: "v1", Resource: resource, Namespace: ns, Name: name},
		Body:      json.RawMessage(body),
	}
}

func linkStrings(links []aggregator.Link) []string {
	out := []string{}
	for _, l := range links {
		out = append(out, string(l.Role)+" "+l.Class+" "+l.Target.String())
	}
	return out
}

func TestEvaluate(t *testing.T) {
	pod := obj("", "pods", "ns1", "p", `{"kind":"Pod","metadata":{"name":"p","namespace":"ns1","labels":{"app":"web"},"annotations":{"peer":"ns2/q"}},
		"spec":{"secretName":"s1","names":["a","","b",null,"a"],"nums":[1,2],"mixed":["a",1],"selfName":"p"}}`)
	tests := []struct {
		name    string
		mutate  func(s *Spec)
		obj     aggregator.Object
		want    []string
		wantErr string
	}{
		{name: "single name", want: []string{"parent volumes c1//secrets/ns1/s1"}},
		{name: "list with empties and duplicates", mutate: func(s *Spec) { s.Targets[0].Name = "object.spec.names" },
			want: []string{"parent volumes c1//secrets/ns1/a", "parent volumes c1//secrets/ns1/b"}},
		{name: "missing field gives nothing", mutate: func(s *Spec) { s.Targets[0].Name = "object.spec.nothing.here" }, want: []string{}},
		{name: "missing field in condition gives nothing", mutate: func(s *Spec) { s.Source.Condition = "object.status.phase == 'Running'" }, want: []string{}},
		{name: "null gives nothing", mutate: func(s *Spec) { s.Targets[0].Name = "null" }, want: []string{}},
		{name: "optional field", mutate: func(s *Spec) { s.Targets[0].Name = "object.spec.?nothing.orValue('fallback')" },
			want: []string{"parent volumes c1//secrets/ns1/fallback"}},
		{name: "condition false", mutate: func(s *Spec) { s.Source.Condition = "object.metadata.name == 'other'" }, want: []string{}},
		{name: "condition uses cluster", mutate: func(s *Spec) { s.Source.Condition = "cluster == 'c1'" }, want: []string{"parent volumes c1//secrets/ns1/s1"}},
		{name: "namespace filter miss", mutate: func(s *Spec) { s.Source.Namespaces = []string{"ns2"} }, want: []string{}},
		{name: "namespace filter hit", mutate: func(s *Spec) { s.Source.Namespaces = []string{"ns2", "ns1"} }, want: []string{"parent volumes c1//secrets/ns1/s1"}},
		{name: "label selector miss", mutate: func(s *Spec) {
			s.Source.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}
		}, want: []string{}},
		{name: "label selector hit", mutate: func(s *Spec) {
			s.Source.LabelSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web"}}}}
		}, want: []string{"parent volumes c1//secrets/ns1/s1"}},
		{name: "other resource", obj: obj("apps", "deployments", "ns1", "p", `{"metadata":{"name":"p"},"spec":{"secretName":"x"}}`), want: []string{}},
		{name: "wildcard resource", mutate: func(s *Spec) { s.Source.Resources = []GroupResource{{Group: "*", Resource: "*"}} },
			obj: obj("apps", "deployments", "ns1", "p", `{"metadata":{"name":"p"},"spec":{"secretName":"x"}}`), want: []string{"parent volumes c1//secrets/ns1/x"}},
		{name: "namespace expression and other cluster", mutate: func(s *Spec) {
			s.Role, s.Class = "child", ""
			s.Targets[0] = Target{Cluster: "c2", Group: "apps", Resource: "deployments",
				Namespace: "object.metadata.annotations.peer.split('/')[0]", Name: "object.metadata.annotations.peer.split('/')[1]"}
		}, want: []string{"child  c2/apps/deployments/ns2/q"}},
		{name: "cluster-scoped target", mutate: func(s *Spec) { s.Targets[0] = Target{Resource: "nodes", Namespace: "''", Name: "'node-1'"} },
			want: []string{"parent volumes c1//nodes//node-1"}},
		{name: "self link skipped", mutate: func(s *Spec) { s.Targets[0] = Target{Resource: "pods", Name: "object.spec.selfName"} }, want: []string{}},
		{name: "two targets", mutate: func(s *Spec) {
			s.Targets = append(s.Targets, Target{Resource: "configmaps", Name: "['c1', 'c2']"})
		}, want: []string{"parent volumes c1//secrets/ns1/s1", "parent volumes c1//configmaps/ns1/c1", "parent volumes c1//configmaps/ns1/c2"}},
		{name: "list of non-strings", mutate: func(s *Spec) { s.Targets[0].Name = "object.spec.nums" }, want: []string{}, wantErr: "list element is int, want string"},
		{name: "dyn non-string", mutate: func(s *Spec) { s.Targets[0].Name = "object.spec.nums[0]" }, want: []string{}, wantErr: "got int, want string or list of strings"},
		{name: "runtime error", mutate: func(s *Spec) { s.Targets[0].Name = "object.spec.names[10]" }, want: []string{}, wantErr: "index"},
		{name: "one target fails, the other links", mutate: func(s *Spec) {
			s.Targets = append([]Target{{Resource: "configmaps", Name: "object.spec.mixed"}}, s.Targets...)
		}, want: []string{"parent volumes c1//secrets/ns1/s1"}, wantErr: "targets[0]: name: list element is int"},
		{name: "selector without lister", mutate: func(s *Spec) {
			s.Targets[0] = Target{Version: "v1", Resource: "pods", Selector: "{'app': 'web'}"}
		}, want: []string{}, wantErr: "selector targets need a cluster client"},
		{name: "empty selector selects nothing", mutate: func(s *Spec) {
			s.Targets[0] = Target{Version: "v1", Resource: "pods", Selector: "object.spec.?selector.orValue({})"}
		}, want: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Compile(rule("r", tt.mutate), "test", CompileOptions{})
			require.NoError(t, err)
			o := pod
			if tt.obj.Resource != "" {
				o = tt.obj
			}
			links, err := r.Evaluate(t.Context(), o, nil)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.EqualValues(t, 1, r.Stats().Errors.Load())
				assert.Contains(t, r.Stats().LastError(), tt.wantErr)
			} else {
				require.NoError(t, err)
				assert.Zero(t, r.Stats().Errors.Load())
			}
			assert.Equal(t, tt.want, linkStrings(links))
			assert.EqualValues(t, len(tt.want), r.Stats().LinksMade.Load())
		})
	}
}

func TestCostLimit(t *testing.T) {
	// Each name costs a few units: 1,000 names exceed a limit of 500.
	expensive := "object.spec.names.map(n, n + '-' + n).filter(n, n.startsWith('x'))"
	names := make([]string, 1000)
	for i := range names {
		names[i] = "n"
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"name": "p"}, "spec": map[string]any{"names": names}})
	require.NoError(t, err)
	o := obj("", "pods", "ns1", "p", string(body))

	r, err := Compile(rule("r", func(s *Spec) { s.Targets[0].Name = expensive }), "test", CompileOptions{CostLimit: 500})
	require.NoError(t, err)
	_, err = r.Evaluate(t.Context(), o, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "operation cancelled: actual cost limit exceeded (500, linkRules.costLimit)")
	assert.EqualValues(t, 1, r.Stats().Errors.Load())

	// The default cost limit allows it. (The time limit is raised: on a loaded 2-core CI machine
	// the evaluation once took over the default 250 ms, which is not what this test is about.)
	r, err = Compile(rule("r", func(s *Spec) { s.Targets[0].Name = expensive }), "test", CompileOptions{EvalTimeout: time.Minute})
	require.NoError(t, err)
	_, err = r.Evaluate(t.Context(), o, nil)
	require.NoError(t, err)
}

func TestMaxTargetsPerObject(t *testing.T) {
	r, err := Compile(rule("r", func(s *Spec) {
		s.Targets[0].Name = "['a', 'b', 'c']"
		s.Targets = append(s.Targets, Target{Resource: "configmaps", Name: "['d']"})
	}), "test", CompileOptions{MaxTargetsPerObject: 2})
	require.NoError(t, err)
	links, err := r.Evaluate(t.Context(), obj("", "pods", "ns1", "p", `{"metadata":{"name":"p"}}`), nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"parent volumes c1//secrets/ns1/a", "parent volumes c1//secrets/ns1/b"}, linkStrings(links))
	assert.EqualValues(t, 1, r.Stats().Truncated.Load())
}

func TestKubernetesLibraries(t *testing.T) {
	// Functions of the Kubernetes CEL environment (as in ValidatingAdmissionPolicy) are there.
	for _, expr := range []string{
		"object.metadata.name.lowerAscii() + '-' + string(quantity('1Gi').asInteger())",
		"[object.metadata.name].sortBy(n, n)[0]",
		"'%s-x'.format([object.metadata.name])",
		"object.metadata.name.matches('^p$') ? 'ok' : 'no'",
	} {
		r, err := Compile(rule("r", func(s *Spec) { s.Targets[0].Name = expr }), "test", CompileOptions{})
		require.NoError(t, err, expr)
		links, err := r.Evaluate(t.Context(), obj("", "pods", "ns1", "p", `{"metadata":{"name":"p"}}`), nil)
		require.NoError(t, err, expr)
		assert.Len(t, links, 1, expr)
	}
}

// Link rules accept and reject target cluster names, and the watched cluster, as
// aggregator.ValidateClusterName does.
func TestClusterNameRule(t *testing.T) {
	for _, tc := range aggregatortest.ClusterNames {
		t.Run(tc.Name, func(t *testing.T) {
			_, err := Compile(rule("r", func(s *Spec) { s.Targets[0].Cluster = tc.Name }), "test", CompileOptions{})
			assert.Equal(t, tc.Valid, err == nil, "target cluster: %v", err)
			err = Config{Cluster: tc.Name}.Validate()
			assert.Equal(t, tc.Valid, err == nil, "config cluster: %v", err)
			if !tc.Valid {
				assert.ErrorIs(t, err, aggregator.ErrInvalidClusterName)
			}
		})
	}
}

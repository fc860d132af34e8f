package linkrule

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/kelemetry/kelemetry/aggregator"
)

// errInvalidRule wraps every reason why a rule is rejected.
var errInvalidRule = errors.New("invalid link rule")

// Limits of a rule's shape.
const (
	maxTargets          = 16
	maxExpressionLength = 4096
	// wildcard matches any group or resource in Source.Resources.
	wildcard = "*"
)

// CEL variables visible to the expressions.
const (
	varObject  = "object"
	varCluster = "cluster"
)

// Rule is a compiled LinkRule, ready to be evaluated. It is immutable and safe for concurrent use.
type Rule struct {
	// Name is the LinkRule's name; Origin says where it came from ("file:<path>" or "cluster").
	Name       string
	Origin     string
	Generation int64

	role       aggregator.Role
	class      string
	resources  []GroupResource
	namespaces map[string]struct{} // nil: any
	selector   labels.Selector     // nil: any
	condition  cel.Program         // nil: none
	targets    []target
	opts       CompileOptions
	stats      *Stats
	measure    metric.MeasurementOption // the rule attribute of the Linker's metrics
}

type target struct {
	cluster, group, version, resource string
	clusterScoped                     bool        // a built-in cluster-scoped resource
	namespace                         cel.Program // nil: the source's namespace, or none if clusterScoped
	name                              cel.Program
	selector                          cel.Program
}

// CompileOptions bound what a compiled rule may cost. The zero value means defaults.
type CompileOptions struct {
	// CostLimit bounds the CEL cost of evaluating one expression on one object (default
	// 100,000; Kubernetes allows 1,000,000 per ValidatingAdmissionPolicy expression).
	CostLimit uint64
	// MaxTargetsPerObject bounds the links one rule makes for one object (default 100); more
	// are dropped and counted as truncated.
	MaxTargetsPerObject int
	// EvalTimeout bounds the time of evaluating one rule's expressions on one object (default
	// 250ms). The cost limit does not see every loop (a filter or exists_one whose predicate is
	// false costs nothing per iteration), so nested comprehensions over large lists are stopped
	// by this deadline instead, counted as errors of the rule.
	EvalTimeout time.Duration
}

// Defaults of CompileOptions.
const (
	defaultCostLimit           = 100_000
	defaultMaxTargetsPerObject = 100
	defaultEvalTimeout         = 250 * time.Millisecond
)

// interruptCheckFrequency is how many comprehension iterations run between two checks of the
// evaluation deadline (the value Kubernetes uses).
const interruptCheckFrequency = 100

func (o CompileOptions) withDefaults() CompileOptions {
	if o.CostLimit == 0 {
		o.CostLimit = defaultCostLimit
	}
	if o.MaxTargetsPerObject <= 0 {
		o.MaxTargetsPerObject = defaultMaxTargetsPerObject
	}
	if o.EvalTimeout <= 0 {
		o.EvalTimeout = defaultEvalTimeout
	}
	return o
}

var (
	envOnce sync.Once
	envVal  *cel.Env
	envErr  error
)

// celEnv is the Kubernetes CEL environment of stored expressions (the functions that
// ValidatingAdmissionPolicy offers: strings, lists, regex, URLs, quantities, IPs, ...) with the
// variables object (dyn) and cluster (string).
func celEnv() (*cel.Env, error) {
	envOnce.Do(func() {
		base := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).StoredExpressionsEnv()
		envVal, envErr = base.Extend(
			cel.Variable(varObject, cel.DynType),
			cel.Variable(varCluster, cel.StringType),
		)
	})
	return envVal, envErr
}

// Compile checks and compiles a rule. The error wraps errInvalidRule and says which field is
// wrong and why.
func Compile(lr LinkRule, origin string, opts CompileOptions) (*Rule, error) {
	opts = opts.withDefaults()
	env, err := celEnv()
	if err != nil {
		return nil, fmt.Errorf("link rule %q: CEL environment: %w", lr.Name, err)
	}
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: %s", errInvalidRule, lr.Name, fmt.Sprintf(format, args...))
	}
	if lr.Name == "" {
		return nil, invalid("metadata.name is required")
	}
	s := lr.Spec
	r := &Rule{Name: lr.Name, Origin: origin, Generation: lr.Generation, class: s.Class, opts: opts, stats: &Stats{},
		// Set once here: a Rule is read concurrently once a Linker has it.
		measure: metric.WithAttributeSet(attribute.NewSet(attribute.String("rule", lr.Name)))}
	r.role = aggregator.Role(s.Role)
	if !r.role.Valid() {
		return nil, invalid("spec.role must be %q or %q, not %q", aggregator.RoleParent, aggregator.RoleChild, s.Role)
	}
	if len(s.Source.Resources) == 0 {
		return nil, invalid(`spec.source.resources needs at least one entry (group and resource may be "*")`)
	}
	for i, gr := range s.Source.Resources {
		if gr.Resource == "" {
			return nil, invalid("spec.source.resources[%d].resource is required", i)
		}
	}
	r.resources = s.Source.Resources
	if len(s.Source.Namespaces) > 0 {
		r.namespaces = make(map[string]struct{}, len(s.Source.Namespaces))
		for _, ns := range s.Source.Namespaces {
			r.namespaces[ns] = struct{}{}
		}
	}
	if s.Source.LabelSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(s.Source.LabelSelector)
		if err != nil {
			return nil, invalid("spec.source.labelSelector: %v", err)
		}
		if !sel.Empty() {
			r.selector = sel
		}
	}
	if s.Source.Condition != "" {
		if r.condition, err = compileExpr(env, s.Source.Condition, opts, types.BoolType); err != nil {
			return nil, invalid("spec.source.condition: %v", err)
		}
	}
	if len(s.Targets) == 0 || len(s.Targets) > maxTargets {
		return nil, invalid("spec.targets needs 1 to %d entries, has %d", maxTargets, len(s.Targets))
	}
	for i, t := range s.Targets {
		ct, err := compileTarget(env, t, opts)
		if err != nil {
			return nil, invalid("spec.targets[%d].%v", i, err)
		}
		r.targets = append(r.targets, ct)
	}
	return r, nil
}

func compileTarget(env *cel.Env, t Target, opts CompileOptions) (target, error) {
	ct := target{cluster: t.Cluster, group: t.Group, version: t.Version, resource: t.Resource,
		clusterScoped: clusterScoped[GroupResource{Group: t.Group, Resource: t.Resource}]}
	if t.Resource == "" {
		return ct, errors.New("resource: required")
	}
	if t.Cluster != "" {
		if err := aggregator.ValidateClusterName(t.Cluster); err != nil {
			return ct, fmt.Errorf("cluster: %w", err)
		}
	}
	if (t.Name == "") == (t.Selector == "") {
		return ct, errors.New("name, selector: exactly one is required")
	}
	var err error
	if t.Namespace != "" {
		if ct.namespace, err = compileExpr(env, t.Namespace, opts, types.StringType); err != nil {
			return ct, fmt.Errorf("namespace: %w", err)
		}
	}
	if t.Name != "" {
		if ct.name, err = compileExpr(env, t.Name, opts, types.StringType, types.NewListType(types.StringType)); err != nil {
			return ct, fmt.Errorf("name: %w", err)
		}
	}
	if t.Selector != "" {
		if t.Version == "" {
			return ct, errors.New("version: required with selector (the targets are listed with it)")
		}
		if ct.selector, err = compileExpr(env, t.Selector, opts, types.StringType, types.NewMapType(types.StringType, types.StringType)); err != nil {
			return ct, fmt.Errorf("selector: %w", err)
		}
	}
	return ct, nil
}

// compileExpr compiles one expression whose static type must be dyn or one of want.
func compileExpr(env *cel.Env, expr string, opts CompileOptions, want ...*types.Type) (cel.Program, error) {
	if len(expr) > maxExpressionLength {
		return nil, fmt.Errorf("expression longer than %d characters", maxExpressionLength)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("compile %q: %s", expr, strings.TrimSpace(iss.Err().Error()))
	}
	if out := ast.OutputType(); !typeAllowed(out, want) {
		names := make([]string, len(want))
		for i, w := range want {
			names[i] = w.String()
		}
		return nil, fmt.Errorf("%q has type %s, want %s", expr, out, strings.Join(names, " or "))
	}
	prg, err := env.Program(ast,
		cel.CostLimit(opts.CostLimit),
		cel.EvalOptions(cel.OptOptimize, cel.OptTrackCost),
		// The cost limit does not bound every loop: comprehensions whose steps cost nothing
		// (filter or exists_one with a false predicate) iterate for free. Checking the deadline
		// of the evaluation's context every interruptCheckFrequency iterations stops them.
		cel.InterruptCheckFrequency(interruptCheckFrequency),
	)
	if err != nil {
		return nil, fmt.Errorf("program %q: %w", expr, err)
	}
	return prg, nil
}

// clusterScoped are the cluster-scoped resources built into Kubernetes. A target of one of them
// without a namespace expression has no namespace (rather than the source's, which would name
// an object that does not exist and, for a selector, list a path the API server does not serve).
var clusterScoped = map[GroupResource]bool{
	{Group: "", Resource: "nodes"}:                                                         true,
	{Group: "", Resource: "namespaces"}:                                                    true,
	{Group: "", Resource: "persistentvolumes"}:                                             true,
	{Group: "", Resource: "componentstatuses"}:                                             true,
	{Group: "networking.k8s.io", Resource: "ingressclasses"}:                               true,
	{Group: "networking.k8s.io", Resource: "ipaddresses"}:                                  true,
	{Group: "networking.k8s.io", Resource: "servicecidrs"}:                                 true,
	{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}:                         true,
	{Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"}:                  true,
	{Group: "storage.k8s.io", Resource: "storageclasses"}:                                  true,
	{Group: "storage.k8s.io", Resource: "volumeattachments"}:                               true,
	{Group: "storage.k8s.io", Resource: "csidrivers"}:                                      true,
	{Group: "storage.k8s.io", Resource: "csinodes"}:                                        true,
	{Group: "storage.k8s.io", Resource: "volumeattributesclasses"}:                         true,
	{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}:                 true,
	{Group: "apiregistration.k8s.io", Resource: "apiservices"}:                             true,
	{Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations"}:     true,
	{Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations"}:   true,
	{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicies"}:       true,
	{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicybindings"}: true,
	{Group: "admissionregistration.k8s.io", Resource: "mutatingadmissionpolicies"}:         true,
	{Group: "admissionregistration.k8s.io", Resource: "mutatingadmissionpolicybindings"}:   true,
	{Group: "scheduling.k8s.io", Resource: "priorityclasses"}:                              true,
	{Group: "node.k8s.io", Resource: "runtimeclasses"}:                                     true,
	{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}:                 true,
	{Group: "flowcontrol.apiserver.k8s.io", Resource: "flowschemas"}:                       true,
	{Group: "flowcontrol.apiserver.k8s.io", Resource: "prioritylevelconfigurations"}:       true,
	{Group: "resource.k8s.io", Resource: "deviceclasses"}:                                  true,
	{Group: "resource.k8s.io", Resource: "resourceslices"}:                                 true,
	{Group: Group, Resource: Resource}:                                                     true,
}

func typeAllowed(out *types.Type, want []*types.Type) bool {
	if out.IsExactType(types.DynType) || out.Kind() == types.DynKind || out.Kind() == types.AnyKind {
		return true
	}
	for _, w := range want {
		if out.IsAssignableType(w) || w.IsAssignableType(out) {
			return true
		}
	}
	// null is a valid "no target".
	return out.IsExactType(types.NullType)
}

// Package linkrule links objects by declarative rules: LinkRule objects (kelemetry.io/v1alpha1,
// cluster-scoped; CRD in deploy/crds) that say "every object that this source selector selects is
// the child (or parent) of the objects these targets name". Targets are named by CEL
// expressions over the source object (the Kubernetes CEL environment of
// ValidatingAdmissionPolicy), or selected by a label selector listed in the target cluster, which
// may be another configured cluster.
//
// Compile checks and compiles a rule once; Linker (an aggregator.Linker) applies a changing set
// of compiled rules, indexed by group and resource; Manager loads rules from a directory of YAML
// files and watches LinkRule objects in a cluster, writing their status (compile result, counts
// of evaluations, links, errors and truncations). Module wires it into fx.
package linkrule

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// API coordinates of the LinkRule kind.
const (
	Group    = "kelemetry.io"
	Version  = "v1alpha1"
	Kind     = "LinkRule"
	Resource = "linkrules"
)

// GroupVersionResource is the resource of LinkRule objects (cluster-scoped).
var GroupVersionResource = schema.GroupVersionResource{Group: Group, Version: Version, Resource: Resource}

// APIVersion is the apiVersion of LinkRule objects.
const APIVersion = Group + "/" + Version

// LinkRule declares a relation between objects: every object that Source selects is linked to
// the objects that Targets name. deploy/crds/kelemetry.io_linkrules.yaml is its CRD.
type LinkRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   Spec   `json:"spec"`
	Status Status `json:"status,omitempty"`
}

// Spec is what a LinkRule asks for.
type Spec struct {
	// Source selects the objects the rule applies to.
	Source Source `json:"source"`
	// Targets name the related objects; each may yield any number of them.
	Targets []Target `json:"targets"`
	// Role is what the targets are to the source: "parent" or "child".
	Role string `json:"role"`
	// Class groups the links under a span of that name in the UI, e.g. "volumes". Optional.
	Class string `json:"class,omitempty"`
}

// Source selects objects. The cheap parts (resources, namespaces, labels) are checked before the
// CEL condition.
type Source struct {
	// Resources the rule applies to; "*" matches any group or any resource. At least one.
	Resources []GroupResource `json:"resources"`
	// Namespaces restricts the rule to objects in these namespaces; empty means any (and
	// cluster-scoped objects).
	Namespaces []string `json:"namespaces,omitempty"`
	// LabelSelector restricts the rule to objects whose labels match.
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	// Condition is a CEL expression over `object` (the source object) and `cluster` (its
	// cluster's name) that must be true. Optional.
	Condition string `json:"condition,omitempty"`
}

// GroupResource names a resource; "*" is a wildcard in either field.
type GroupResource struct {
	Group    string `json:"group"`
	Resource string `json:"resource"`
}

// Target names related objects. Exactly one of Name and Selector is set. Expressions are CEL over
// `object` (the source object) and `cluster` (the source's cluster name).
type Target struct {
	// Cluster is the target's cluster name; empty means the source's cluster.
	Cluster string `json:"cluster,omitempty"`
	// Group, Version and Resource of the targets. Version is needed with Selector.
	Group    string `json:"group"`
	Version  string `json:"version,omitempty"`
	Resource string `json:"resource"`
	// Namespace is a CEL expression giving the targets' namespace; "" (the value) means
	// cluster-scoped targets. When the field is empty the source's namespace is used, or none
	// for the cluster-scoped resources built into Kubernetes (nodes, namespaces,
	// persistentvolumes, storageclasses, clusterroles, ...).
	Namespace string `json:"namespace,omitempty"`
	// Name is a CEL expression giving a target name or a list of them; null, "" and missing
	// fields give no target.
	Name string `json:"name,omitempty"`
	// Selector is a CEL expression giving a label selector, either as a map of labels to equal
	// (e.g. object.spec.selector) or as a string ("app=web,tier in (a,b)"). The matching objects
	// are listed in the target cluster. A null or empty selector gives no target (never
	// "everything").
	Selector string `json:"selector,omitempty"`
}

// Status is what Kelemetry reports about a LinkRule it watches.
type Status struct {
	// ObservedGeneration is the generation the rest of the status is about.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: "Ready" is True when the rule compiled and is applied.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Evaluations counts objects the rule was evaluated on (after the cheap selectors matched).
	Evaluations int64 `json:"evaluations,omitempty"`
	// LinksMade counts links the rule produced.
	LinksMade int64 `json:"linksMade,omitempty"`
	// Errors counts failed evaluations (expression errors, cost limit, failed lists).
	Errors int64 `json:"errors,omitempty"`
	// Truncated counts evaluations whose targets were cut at the per-rule limit.
	Truncated int64 `json:"truncated,omitempty"`
	// LastError is the most recent evaluation error.
	LastError string `json:"lastError,omitempty"`
}

// Condition type and reasons written to Status.
const (
	ConditionReady      = "Ready"
	ReasonCompiled      = "Compiled"
	ReasonInvalid       = "Invalid"
	ReasonCompileFailed = "CompileFailed"
)

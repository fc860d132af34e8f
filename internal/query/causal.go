package query

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kelemetry/kelemetry/internal/changefeed"
)

// Relation says how the object of a cause relates to the object of the step it causes.
type Relation string

// Relations of CausalRule.Relation.
const (
	RelSelf   Relation = "self"   // the same object
	RelParent Relation = "parent" // the cause's object is a parent of the step's (its owner)
	RelChild  Relation = "child"  // the cause's object is a child of the step's (owned by it)
	RelLinked Relation = "linked" // self, parent or child
	// RelSibling: the cause's object has a parent of the step's object (another ReplicaSet of
	// the same Deployment), or is the step's object itself.
	RelSibling Relation = "sibling"
)

// CausalRule says which change of which object a controller reacts to: a write by one of
// Controllers on Resource (Subresource, with one of Verbs) is caused by the latest write on
// CauseResource (CauseSubresource, one of CauseVerbs, changing CauseField) of an object in
// Relation to it. Empty lists and strings match anything, except Subresource and
// CauseSubresource: "" is the object itself and "*" any subresource.
type CausalRule struct {
	// Name names the rule in the answers (the rule of a critical path step).
	Name string `yaml:"name" json:"name"`
	// Controllers are the controller names the rule applies to: the service account name of
	// system:serviceaccount:<ns>:<name>, "kubelet" for system:node:<node>, the rest of another
	// system: user (system:kube-scheduler is "kube-scheduler"), or the user itself.
	Controllers []string `yaml:"controllers" json:"controllers"`
	// Resource, Subresource and Verbs select the reaction.
	Resource    string   `yaml:"resource" json:"resource"`
	Subresource string   `yaml:"subresource" json:"subresource"`
	Verbs       []string `yaml:"verbs" json:"verbs"`
	// CauseResource, CauseSubresource and CauseVerbs select the cause.
	CauseResource    string   `yaml:"causeResource" json:"causeResource"`
	CauseSubresource string   `yaml:"causeSubresource" json:"causeSubresource"`
	CauseVerbs       []string `yaml:"causeVerbs" json:"causeVerbs"`
	// CauseField, when set, is a field path prefix (e.g. "spec") the cause must have changed,
	// per its diff logs. A cause that created the object or has no diff logs matches.
	CauseField string `yaml:"causeField" json:"causeField"`
	// Relation is where the cause is, seen from the reaction's object.
	Relation Relation `yaml:"relation" json:"relation"`
}

// DefaultCausalRules are the reactions of the core controllers of a workload rollout:
//
//	deployments spec (or scale)   -> replicasets written by deployment-controller
//	replicasets spec              -> pods created/deleted by replicaset-controller
//	pods created                  -> pods/binding by the scheduler
//	pods/binding                  -> pods/status by the kubelet (or kwok)
//	pods deleted gracefully       -> pods deleted for good by the kubelet (or kwok)
//	pods status or deletion       -> replicasets/status by replicaset-controller
//	replicasets (status or spec)  -> deployments/status by deployment-controller
//	a replicaset's status         -> the deployment's replicasets scaled by deployment-controller
//	                                 (a rollout goes on when the new Pods are available)
//	an owner deleted              -> its children deleted by the garbage collector
//
// A step that no rule explains is caused by the latest write of a linked object (itself, a
// parent or a child) before it.
var DefaultCausalRules = []CausalRule{
	{Name: "deployment-spec", Controllers: []string{"deployment-controller"}, Resource: "replicasets", Subresource: "*",
		Verbs: []string{"create", "update", "patch", "delete"}, CauseResource: "deployments", CauseSubresource: "*",
		CauseVerbs: []string{"create", "update", "patch"}, CauseField: "spec", Relation: RelParent},
	{Name: "deployment-rollout", Controllers: []string{"deployment-controller"}, Resource: "replicasets", Subresource: "*",
		Verbs: []string{"update", "patch"}, CauseResource: "replicasets", CauseSubresource: "status",
		CauseVerbs: []string{"update", "patch"}, Relation: RelSibling},
	{Name: "replicaset-spec", Controllers: []string{"replicaset-controller"}, Resource: "pods",
		Verbs: []string{"create", "delete"}, CauseResource: "replicasets", CauseVerbs: []string{"create", "update", "patch"},
		CauseField: "spec", Relation: RelParent},
	{Name: "schedule", Controllers: []string{"kube-scheduler", "default-scheduler"}, Resource: "pods", Subresource: "binding",
		Verbs: []string{"create"}, CauseResource: "pods", CauseVerbs: []string{"create"}, Relation: RelSelf},
	{Name: "pod-start", Controllers: []string{"kubelet", "kwok-controller"}, Resource: "pods", Subresource: "status",
		Verbs: []string{"update", "patch"}, CauseResource: "pods", CauseSubresource: "binding", CauseVerbs: []string{"create"},
		Relation: RelSelf},
	{Name: "pod-terminate", Controllers: []string{"kubelet", "kwok-controller"}, Resource: "pods",
		Verbs: []string{"delete"}, CauseResource: "pods", CauseVerbs: []string{"delete"}, Relation: RelSelf},
	{Name: "replicaset-status", Controllers: []string{"replicaset-controller"}, Resource: "replicasets", Subresource: "status",
		Verbs: []string{"update", "patch"}, CauseResource: "pods", CauseSubresource: "*", Relation: RelChild},
	{Name: "deployment-status", Controllers: []string{"deployment-controller"}, Resource: "deployments", Subresource: "status",
		Verbs: []string{"update", "patch"}, CauseResource: "replicasets", CauseSubresource: "*", Relation: RelChild},
	{Name: "garbage-collect", Controllers: []string{"generic-garbage-collector"}, Verbs: []string{"delete"},
		CauseVerbs: []string{"delete"}, Relation: RelParent},
}

// controllerName names the controller behind a user: the service account name for
// system:serviceaccount:<ns>:<name>, "kubelet" for system:node:<node>, the rest of a system:
// user (system:kube-scheduler is "kube-scheduler"), or the user itself.
func controllerName(user string) string {
	switch {
	case strings.HasPrefix(user, "system:serviceaccount:"):
		rest := strings.TrimPrefix(user, "system:serviceaccount:")
		if _, name, ok := strings.Cut(rest, ":"); ok && name != "" {
			return name
		}
		return rest
	case strings.HasPrefix(user, "system:node:"):
		return "kubelet"
	case strings.HasPrefix(user, "system:") && len(user) > len("system:"):
		return strings.TrimPrefix(user, "system:")
	}
	return user
}

// isPersonAgent reports whether a write by user with the given user agent was a person's: not a
// system: user (controllers, nodes, service accounts) and through a client people drive
// (kubectl/v1.37.2 (linux/amd64) ...); the time before it is waiting for that person, not a
// controller's reaction.
func isPersonAgent(user, agent string) bool {
	return changefeed.UserKind(user, agent) == changefeed.KindPerson
}

// matchSub reports whether a rule's subresource pattern matches sub.
func matchSub(pattern, sub string) bool { return pattern == "*" || pattern == sub }

// matchList reports whether v is in list; an empty list matches anything.
func matchList(list []string, v string) bool { return len(list) == 0 || slices.Contains(list, v) }

// reacts reports whether the rule covers step s as a reaction.
func (r *CausalRule) reacts(s *causalEvent) bool {
	return matchList(r.Controllers, s.controller) && (r.Resource == "" || r.Resource == s.key.Resource) &&
		(r.Resource == "" && r.Subresource == "" || matchSub(r.Subresource, s.sub)) && matchList(r.Verbs, s.verb)
}

// causes reports whether c qualifies as the rule's cause (the relation is checked by the caller).
func (r *CausalRule) causes(c *causalEvent) bool {
	if r.CauseResource != "" && r.CauseResource != c.key.Resource {
		return false
	}
	if (r.CauseResource != "" || r.CauseSubresource != "") && !matchSub(r.CauseSubresource, c.sub) {
		return false
	}
	if !matchList(r.CauseVerbs, c.verb) {
		return false
	}
	if r.CauseField == "" || c.verb == "create" || len(c.fields) == 0 {
		return true
	}
	for _, f := range c.fields {
		if f == r.CauseField || strings.HasPrefix(f, r.CauseField+".") || strings.HasPrefix(f, r.CauseField+"[") {
			return true
		}
	}
	return false
}

// Rule names the answers use for steps no rule explains; a CausalRule may not take them.
var reservedRuleNames = []string{"start", "linked", "unexplained"}

// writeVerbs are the verbs a rule may name: the critical path considers writes only.
var writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}

// ValidateCausalRules reports the rules that cannot work: a missing, repeated or reserved name
// ("start", "linked", "unexplained"), a relation other than self, parent, child, sibling or linked, a
// verb that is not a write (create, update, patch, delete, deletecollection), an empty
// controller name or a subresource without a resource. Each error names the rule by its place
// and name: causalRules[2] "my-rule": relation "cousin": want self, parent, child, sibling or linked.
func ValidateCausalRules(rules []CausalRule) error { return errors.Join(causalRuleErrors(rules)...) }

func causalRuleErrors(rules []CausalRule) []error {
	var errs []error
	seen := map[string]int{}
	for i, r := range rules {
		at := fmt.Sprintf("causalRules[%d]", i)
		if r.Name != "" {
			at += fmt.Sprintf(" %q", r.Name)
		}
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s: %s", at, fmt.Sprintf(format, args...)))
		}
		switch {
		case r.Name == "":
			bad("name is required (it names the rule in the answers' steps)")
		case slices.Contains(reservedRuleNames, r.Name):
			bad("name %q is reserved for steps no rule explains (%s)", r.Name, strings.Join(reservedRuleNames, ", "))
		default:
			if j, dup := seen[r.Name]; dup {
				bad("name given twice (also causalRules[%d])", j)
			} else {
				seen[r.Name] = i
			}
		}
		switch r.Relation {
		case RelSelf, RelParent, RelChild, RelLinked, RelSibling:
		case "":
			bad("relation is required: self, parent, child, sibling or linked (where the cause's object is, seen from the reaction's)")
		default:
			bad("relation %q: want self, parent, child, sibling or linked", r.Relation)
		}
		for _, v := range []struct {
			field string
			verbs []string
		}{{"verbs", r.Verbs}, {"causeVerbs", r.CauseVerbs}} {
			for _, verb := range v.verbs {
				if !slices.Contains(writeVerbs, verb) {
					bad("%s: %q is not a write verb (want %s)", v.field, verb, strings.Join(writeVerbs, ", "))
				}
			}
		}
		if slices.Contains(r.Controllers, "") {
			bad("controllers: an empty name (controller names are as ControllerName gives them, e.g. deployment-controller)")
		}
		if r.Resource == "" && r.Subresource != "" && r.Subresource != "*" {
			bad("subresource %q without a resource", r.Subresource)
		}
		if r.CauseResource == "" && r.CauseSubresource != "" && r.CauseSubresource != "*" {
			bad("causeSubresource %q without a causeResource", r.CauseSubresource)
		}
	}
	return errs
}

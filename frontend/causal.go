package frontend

import "github.com/kelemetry/kelemetry/internal/query"

// Relation says how the object of a cause relates to the object of the step it causes.
type Relation = query.Relation

// Relations of CausalRule.Relation.
const (
	RelSelf   = query.RelSelf   // the same object
	RelParent = query.RelParent // the cause's object is a parent of the step's (its owner)
	RelChild  = query.RelChild  // the cause's object is a child of the step's (owned by it)
	RelLinked = query.RelLinked // self, parent or child
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
//	an owner deleted              -> its children deleted by the garbage collector
//
// A step that no rule explains is caused by the latest write of a linked object (itself, a
// parent or a child) before it.
var DefaultCausalRules = causalRules(query.DefaultCausalRules)

// ValidateCausalRules reports the rules that cannot work: a missing, repeated or reserved name
// ("start", "linked", "unexplained"), a relation other than self, parent, child or linked, a
// verb that is not a write (create, update, patch, delete, deletecollection), an empty
// controller name or a subresource without a resource. Each error names the rule by its place
// and name: causalRules[2] "my-rule": relation "sibling": want self, parent, child or linked.
func ValidateCausalRules(rules []CausalRule) error {
	return query.ValidateCausalRules(engineRules(rules))
}

// engineRules converts rules for the engine; nil stays nil (the defaults).
func engineRules(rules []CausalRule) []query.CausalRule {
	if rules == nil {
		return nil
	}
	out := make([]query.CausalRule, len(rules))
	for i, r := range rules {
		out[i] = query.CausalRule(r)
	}
	return out
}

// causalRules converts the engine's rules.
func causalRules(rules []query.CausalRule) []CausalRule {
	out := make([]CausalRule, len(rules))
	for i, r := range rules {
		out[i] = CausalRule(r)
	}
	return out
}

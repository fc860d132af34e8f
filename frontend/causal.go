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

// CausalRule says which change of which object a controller reacts to (see the type it names).
type CausalRule = query.CausalRule

// DefaultCausalRules are the rules of Config.CausalRules when it is nil: copy them and add a rule
// to extend them.
var DefaultCausalRules = query.DefaultCausalRules

// ValidateCausalRules reports rules that cannot match, naming the rule.
func ValidateCausalRules(rules []CausalRule) error { return query.ValidateCausalRules(rules) }

package frontend

import "github.com/kelemetry/kelemetry/internal/query"

// CausalRule says which change of which object a controller reacts to (see the type it names;
// its Relation is "self", "parent", "child" or "linked").
type CausalRule = query.CausalRule

// DefaultCausalRules are the rules of Config.CausalRules when it is nil: copy them and add a rule
// to extend them.
var DefaultCausalRules = query.DefaultCausalRules

// Package dashboards reads Grafana dashboard JSON for the tests that hold the shipped dashboards
// against the metrics the code exports.
package dashboards

// Exprs returns every PromQL expression of a decoded Grafana dashboard: the panels' targets'
// "expr" and the template variables' "definition", depth first.
func Exprs(v any) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if s, ok := val.(string); ok && (k == "expr" || k == "definition") {
				out = append(out, s)
			}
			out = append(out, Exprs(val)...)
		}
	case []any:
		for _, val := range x {
			out = append(out, Exprs(val)...)
		}
	}
	return out
}

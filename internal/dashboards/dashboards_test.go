package dashboards

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestExprs(t *testing.T) {
	var d any
	if err := json.Unmarshal([]byte(`{"templating": {"list": [{"definition": "label_values(x, job)", "query": "ignored"}]},
		"panels": [{"targets": [{"expr": "rate(a[5m])"}, {"expr": "b"}]}, {"type": "row", "panels": [{"targets": [{"expr": "c"}]}]}]}`), &d); err != nil {
		t.Fatal(err)
	}
	got := Exprs(d)
	slices.Sort(got)
	if want := []string{"b", "c", "label_values(x, job)", "rate(a[5m])"}; !slices.Equal(got, want) {
		t.Errorf("Exprs = %q, want %q", got, want)
	}
}

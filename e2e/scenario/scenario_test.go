package scenario

import (
	"slices"
	"testing"
)

func TestRegistry(t *testing.T) {
	for _, name := range []string{"rollout", "cronjob", "annotations", "ancestors"} {
		sc, ok := Lookup(name)
		if !ok || sc.Name != name || sc.Run == nil || sc.Description == "" {
			t.Errorf("scenario %q: %+v, %v", name, sc, ok)
		}
		if !slices.Contains(Names(), name) {
			t.Errorf("Names() lacks %q", name)
		}
	}
	if _, ok := Lookup("nope"); ok {
		t.Error("Lookup of an unknown name succeeded")
	}
	names := Names()
	slices.Sort(names)
	if len(slices.Compact(names)) != len(All()) {
		t.Errorf("duplicate scenario names: %v", Names())
	}
}

package main

import "testing"

func TestGCPercentDefaultUnlessGOGCSet(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if pct, ok := gcPercent(getenv); !ok || pct != defaultGCPercent {
		t.Fatalf("GOGC unset: gcPercent = %d, %v; want %d, true", pct, ok, defaultGCPercent)
	}
	for _, v := range []string{"100", "off", "50"} {
		env["GOGC"] = v
		if pct, ok := gcPercent(getenv); ok {
			t.Fatalf("GOGC=%s: gcPercent = %d, true; want the environment to win", v, pct)
		}
	}
}

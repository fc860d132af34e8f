package diff

import (
	"encoding/json"
	"testing"
)

// FuzzCompare checks that no input makes Compare or Snapshot panic, that a document equals
// itself, and that snapshots of valid JSON are valid JSON. Run with:
//
//	go test ./diff -run '^$' -fuzz FuzzCompare -fuzztime 30s
func FuzzCompare(f *testing.F) {
	f.Add([]byte(`{"a":1}`), []byte(`{"a":2}`))
	f.Add([]byte(secretV1), []byte(secretV2))
	f.Add([]byte(`{"metadata":{"managedFields":[{}],"name":"x"},"spec":{"containers":[{"name":"a"}]}}`), []byte(`{"spec":{"containers":[{"name":"b"},{"name":"a","x":"\"]}"}]}}`))
	f.Add([]byte(`{"args":["a","b"]}`), []byte(`{"args":["b","a",null,1.0e3]}`))
	d, err := New(Options{Redact: []RedactRule{{PathRegex: `token`}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		_, _ = d.Compare(Resource{}, a, b)
		if json.Valid(a) {
			same, err := d.Compare(Resource{}, a, a)
			if err == nil && len(same) != 0 {
				t.Fatalf("%s differs from itself: %v", a, same)
			}
			snap, err := d.Snapshot(Resource{}, a)
			if err == nil && !json.Valid(snap) {
				t.Fatalf("snapshot of %s is not JSON: %s", a, snap)
			}
		}
	})
}

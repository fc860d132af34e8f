package objdiff

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/kelemetry/kelemetry/diff"
)

// cloneChanges copies the values of changes as Compare does.
func cloneChanges(changes []Change) []Change {
	for i := range changes {
		changes[i].Old, changes[i].New = bytes.Clone(changes[i].Old), bytes.Clone(changes[i].New)
	}
	return changes
}

// FuzzCompare checks that no input makes Compare or Snapshot panic, that a document equals
// itself, that snapshots of valid JSON are valid JSON, and that a comparison given the new
// document's Layout finds what one that scans it finds. Run with:
//
//	go test ./diff -run '^$' -fuzz FuzzCompare -fuzztime 30s
func FuzzCompare(f *testing.F) {
	f.Add([]byte(`{"a":1}`), []byte(`{"a":2}`))
	f.Add([]byte(secretV1), []byte(secretV2))
	f.Add([]byte(`{"metadata":{"managedFields":[{}],"name":"x"},"spec":{"containers":[{"name":"a"}]}}`), []byte(`{"spec":{"containers":[{"name":"b"},{"name":"a","x":"\"]}"}]}}`))
	f.Add([]byte(`{"args":["a","b"]}`), []byte(`{"args":["b","a",null,1.0e3]}`))
	d, err := New(diff.Options{Redact: []diff.RedactRule{{PathRegex: `token`}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		want, wantErr := d.Compare(diff.Resource{}, a, b)
		// Given b's Layout, the comparison finds the same; given a's (a wrong one), it must not
		// panic.
		if lay, err := LayoutOf(b); err == nil {
			got, _, gotErr := d.compare(diff.Resource{}, a, nil, b, indexOf(trim(b), lay), false)
			if (wantErr == nil) != (gotErr == nil) || !reflect.DeepEqual(want, cloneChanges(got)) {
				t.Fatalf("with the Layout of %s: %v, %v; without: %v, %v", b, got, gotErr, want, wantErr)
			}
		}
		if lay, err := LayoutOf(a); err == nil {
			lay.size = len(trim(b))
			_, _, _ = d.compare(diff.Resource{}, a, nil, b, indexOf(trim(b), lay), false)
		}
		if json.Valid(a) {
			same, err := d.Compare(diff.Resource{}, a, a)
			if err == nil && len(same) != 0 {
				t.Fatalf("%s differs from itself: %v", a, same)
			}
			snap, err := d.Snapshot(diff.Resource{}, a)
			if err == nil && !json.Valid(snap) {
				t.Fatalf("snapshot of %s is not JSON: %s", a, snap)
			}
		}
	})
}

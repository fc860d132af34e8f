package query

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/diff"
	"github.com/kelemetry/kelemetry/internal/objdiff"
)

// TestFoldEventDiffLines: a folded event's "diff" and "verbose diff" fields hold the non-empty
// lines of its diff logs of each class, in order, one per line, whatever the mix of classes,
// empty lines and logs.
func TestFoldEventDiffLines(t *testing.T) {
	// want is the definition: split every diff log into lines, keep each class's, join them.
	want := func(logs []aggregator.Log) (string, string) {
		var diffs, verbose []string
		for _, l := range logs {
			if l.Type != aggregator.LogTypeDiff {
				continue
			}
			for _, line := range strings.Split(strings.TrimRight(l.Message, "\n"), "\n") {
				switch {
				case line == "":
				case diffClass(line) == "diff":
					diffs = append(diffs, line)
				case diffClass(line) == "verbose diff":
					verbose = append(verbose, line)
				}
			}
		}
		return strings.Join(diffs, "\n"), strings.Join(verbose, "\n")
	}
	const (
		a  = `spec.replicas 1 -> 2`
		b  = `spec.template.spec.containers[0].image "a" -> "b"`
		rv = `metadata.resourceVersion "1" -> "2"`
		mf = `metadata.managedFields[0].time "x" -> "y"`
	)
	for name, msgs := range map[string][]string{
		"one line":              {a},
		"all diff":              {a + "\n" + b + "\n"},
		"verbose between":       {a + "\n" + rv + "\n" + b},
		"managed fields first":  {mf + "\n" + a + "\n" + b},
		"empty lines":           {"\n" + a + "\n\n" + b + "\n\n"},
		"only verbose":          {rv},
		"nothing":               {"", "\n"},
		"two logs":              {a + "\n" + rv, b + "\n" + mf},
		"three logs, one empty": {a, "", b + "\n" + a},
		"four pieces":           {a, b, a + "\n" + rv + "\n" + b},
	} {
		t.Run(name, func(t *testing.T) {
			ev := &aggregator.Span{Source: "audit", Name: "update"}
			for _, m := range msgs {
				ev.Logs = append(ev.Logs, aggregator.Log{Type: aggregator.LogTypeDiff, Message: m})
			}
			ev.Logs = append(ev.Logs, aggregator.Log{Type: aggregator.LogTypeError, Message: "boom"})
			got := map[string]any{}
			for _, f := range foldEvent(ev).fields {
				got[f.Key] = f.Value
			}
			wd, wv := want(ev.Logs)
			if wd == "" {
				assert.NotContains(t, got, "diff")
			} else {
				assert.Equal(t, wd, got["diff"])
			}
			if wv == "" {
				assert.NotContains(t, got, "verbose diff")
			} else {
				assert.Equal(t, wv, got["verbose diff"])
			}
			assert.Equal(t, "boom", got["error"])
		})
	}
}

// TestFoldEventDiffNotes: a diff log that is a note about the diff (AttrOp none, unavailable,
// truncated, request_patch) goes to the folded event's "diff note" field, not among the changes.
func TestFoldEventDiffNotes(t *testing.T) {
	note := func(op, msg string) aggregator.Log {
		return aggregator.Log{Type: aggregator.LogTypeDiff, Message: msg, Attributes: aggregator.Attrs{{Key: diff.AttrOp, Value: op}}}
	}
	ev := &aggregator.Span{Source: "audit", Name: "patch", Logs: []aggregator.Log{
		note(objdiff.OpRequestPatch, "diff unavailable: no previous version seen; the changes are the request's merge patch (values before it unknown)"),
		{Type: aggregator.LogTypeDiff, Message: "metadata.labels.team <unknown> -> a", Attributes: aggregator.Attrs{{Key: diff.AttrOp, Value: string(objdiff.OpPatch)}}},
		note(diff.OpTruncated, "3 more changes not shown"),
	}}
	got := map[string]any{}
	for _, f := range foldEvent(ev).fields {
		got[f.Key] = f.Value
	}
	assert.Equal(t, "metadata.labels.team <unknown> -> a", got["diff"])
	assert.Equal(t, "diff unavailable: no previous version seen; the changes are the request's merge patch (values before it unknown)\n3 more changes not shown", got["diff note"])

	ev = &aggregator.Span{Source: "audit", Name: "update", Logs: []aggregator.Log{note(diff.OpNone, "no-op: resourceVersion 5 unchanged")}}
	got = map[string]any{}
	for _, f := range foldEvent(ev).fields {
		got[f.Key] = f.Value
	}
	assert.NotContains(t, got, "diff")
	assert.Equal(t, "no-op: resourceVersion 5 unchanged", got["diff note"])
}

package objdiff

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/diff"
)

// TestChangeLogs checks each log against the change it renders: the line, the attributes, the
// limits. The logs' strings share one buffer, so each must still read its own bytes once all are
// made.
func TestChangeLogs(t *testing.T) {
	f := LogFormat{MaxChanges: 5, MaxValueBytes: 8}.WithDefaults()
	long := []byte(`"` + strings.Repeat("x", 40) + `"`)
	changes := []Change{
		{Path: "spec.replicas", Op: OpReplace, Old: []byte("1"), New: []byte("3")},
		{Path: "metadata.labels.app", Op: OpAdd, New: []byte(`"web"`)},
		{Path: "spec.template", Op: OpRemove, Old: []byte(`{"a":[1,2]}`)},
		{Path: "data.password", Op: OpReplace, Old: []byte(`"<redacted:1>"`), New: []byte(`"<redacted:2>"`), Redacted: true},
		{Path: "", Op: OpReplace, Old: long, New: []byte(`""`)},
		{Path: "spec.paused", Op: OpAdd, New: []byte("true")},
		{Path: "spec.x", Op: OpAdd, New: []byte("1")},
	}
	at := time.Unix(100, 0)
	logs := f.ChangeLogs(at, changes)
	require.Len(t, logs, 6)
	for i, c := range changes[:5] {
		l := logs[i]
		assert.Equal(t, at, l.Time)
		assert.Equal(t, aggregator.LogTypeDiff, l.Type)
		assert.Equal(t, c.Line(f.MaxValueBytes), l.Message)
		want := aggregator.Attrs{{Key: diff.AttrPath, Value: c.Path}, {Key: diff.AttrOp, Value: string(c.Op)}}
		truncated := false
		for _, kv := range []struct {
			key string
			v   []byte
		}{{diff.AttrOld, c.Old}, {diff.AttrNew, c.New}} {
			switch {
			case kv.v == nil:
			case len(kv.v) > 4*f.MaxValueBytes:
				truncated = true
			default:
				want = append(want, aggregator.Attr{Key: kv.key, Value: string(kv.v)})
			}
		}
		if c.Redacted {
			want = append(want, aggregator.Attr{Key: diff.AttrRedacted, Value: "true"})
		}
		if truncated {
			want = append(want, aggregator.Attr{Key: diff.AttrTruncated, Value: "true"})
		}
		assert.Equal(t, want, l.Attributes, c.Path)
	}
	assert.Equal(t, ". "+strings.Repeat("x", 8)+"… -> \"\"", logs[4].Message)
	assert.Equal(t, "2 more changes not shown", logs[5].Message)
	assert.Equal(t, aggregator.Attrs{{Key: diff.AttrOp, Value: diff.OpTruncated}}, logs[5].Attributes)
	assert.Empty(t, f.ChangeLogs(at, nil))
}

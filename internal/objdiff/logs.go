package objdiff

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/diff"
)

// LogFormat bounds the span logs rendered from changes and snapshots: by a Stream, and from the
// informer's records (changes.Record.Logs). The zero value means the defaults of StreamConfig.
type LogFormat struct {
	// MaxChanges bounds the diff logs of one write; one more log counts the rest.
	MaxChanges int
	// MaxValueBytes cuts each value in a diff line; values longer than 4 times this are left out
	// of the attributes (AttrTruncated).
	MaxValueBytes int
	// MaxSnapshotBytes: larger snapshots are replaced by a note.
	MaxSnapshotBytes int
}

// FormatOf returns the log bounds of c (defaults for zero fields).
func FormatOf(c diff.StreamConfig) LogFormat {
	c = c.WithDefaults()
	return LogFormat{MaxChanges: c.MaxChanges, MaxValueBytes: c.MaxValueBytes, MaxSnapshotBytes: c.MaxSnapshotBytes}
}

// WithDefaults returns f with zero fields set to the defaults of StreamConfig.
func (f LogFormat) WithDefaults() LogFormat {
	d := diff.StreamConfig{}.WithDefaults()
	if f.MaxChanges == 0 {
		f.MaxChanges = d.MaxChanges
	}
	if f.MaxValueBytes == 0 {
		f.MaxValueBytes = d.MaxValueBytes
	}
	if f.MaxSnapshotBytes == 0 {
		f.MaxSnapshotBytes = d.MaxSnapshotBytes
	}
	return f
}

// ChangeLogs renders changes as logs of type aggregator.LogTypeDiff, one per change (message
// "<path> <old> -> <new>", attributes AttrPath, AttrOp, AttrOld, AttrNew), at most MaxChanges,
// then one OpTruncated log counting the rest. f must have its defaults set.
//
// The strings of all the logs (lines and values) share one buffer: a write's diff is one
// allocation for its text instead of three per change.
func (f LogFormat) ChangeLogs(at time.Time, changes []Change) []aggregator.Log {
	n := min(len(changes), f.MaxChanges)
	logs := make([]aggregator.Log, 0, n+1)
	maxAttr := 4 * f.MaxValueBytes
	backing := make(aggregator.Attrs, 0, 5*n)
	// First the text, with the offsets of each string; then the strings over the finished
	// buffer, which nothing writes afterwards.
	type span struct{ start, end int }
	type pieces struct{ line, old, new span }
	size := 0
	for _, c := range changes[:n] {
		size += len(c.Path) + 8 + 2*min(len(c.Old)+len(c.New), 2*maxAttr)
	}
	text := make([]byte, 0, size)
	spans := make([]pieces, n)
	for i, c := range changes[:n] {
		p := &spans[i]
		p.line.start = len(text)
		text = c.appendLine(text, f.MaxValueBytes)
		p.line.end = len(text)
		for _, kv := range [...]struct {
			v   []byte
			dst *span
		}{{c.Old, &p.old}, {c.New, &p.new}} {
			if kv.v != nil && len(kv.v) <= maxAttr {
				kv.dst.start = len(text)
				text = append(text, kv.v...)
				kv.dst.end = len(text)
			} else {
				kv.dst.start = -1
			}
		}
	}
	str := func(s span) string {
		if s.end == s.start {
			return ""
		}
		return unsafe.String(&text[s.start], s.end-s.start)
	}
	for i, c := range changes[:n] {
		p := spans[i]
		attrs := backing[len(backing) : len(backing) : len(backing)+5]
		attrs = append(attrs, aggregator.Attr{Key: diff.AttrPath, Value: c.Path}, aggregator.Attr{Key: diff.AttrOp, Value: string(c.Op)})
		truncated := false
		for _, kv := range [...]struct {
			key string
			v   []byte
			s   span
		}{{diff.AttrOld, c.Old, p.old}, {diff.AttrNew, c.New, p.new}} {
			switch {
			case kv.v == nil:
			case kv.s.start < 0:
				truncated = true
			default:
				attrs = append(attrs, aggregator.Attr{Key: kv.key, Value: str(kv.s)})
			}
		}
		if c.Redacted {
			attrs = append(attrs, aggregator.Attr{Key: diff.AttrRedacted, Value: "true"})
		}
		if truncated {
			attrs = append(attrs, aggregator.Attr{Key: diff.AttrTruncated, Value: "true"})
		}
		backing = backing[:len(backing)+len(attrs)]
		logs = append(logs, aggregator.Log{Time: at, Type: aggregator.LogTypeDiff, Message: str(p.line), Attributes: attrs})
	}
	if rest := len(changes) - n; rest > 0 {
		logs = append(logs, aggregator.Log{Time: at, Type: aggregator.LogTypeDiff,
			Message:    fmt.Sprintf("%d more changes not shown", rest),
			Attributes: aggregator.Attrs{{Key: diff.AttrOp, Value: diff.OpTruncated}}})
	}
	return logs
}

// SnapshotLog renders a snapshot as a log of type aggregator.LogTypeSnapshot: kind is "creation"
// or "deletion" (AttrSnapshotKind), source where it came from (AttrSnapshotSource), rv its
// resourceVersion (AttrSnapshotRV, left out when empty). A snapshot larger than MaxSnapshotBytes
// is replaced by a note. f must have its defaults set.
func (f LogFormat) SnapshotLog(at time.Time, kind, source, rv string, snap []byte) aggregator.Log {
	return f.snapshotLog(at, kind, source, rv, snap, false)
}

// snapshotLog is SnapshotLog; with alias the message shares snap's memory instead of copying it,
// for a snapshot that is never modified (the Stream's).
func (f LogFormat) snapshotLog(at time.Time, kind, source, rv string, snap []byte, alias bool) aggregator.Log {
	attrs := aggregator.Attrs{{Key: diff.AttrSnapshotKind, Value: kind}, {Key: diff.AttrSnapshotSource, Value: source}}
	if rv != "" {
		attrs = append(attrs, aggregator.Attr{Key: diff.AttrSnapshotRV, Value: rv})
	}
	var msg string
	switch {
	case len(snap) > f.MaxSnapshotBytes:
		msg = fmt.Sprintf("%s snapshot omitted: %d bytes (more than %d)", kind, len(snap), f.MaxSnapshotBytes)
		attrs = append(attrs, aggregator.Attr{Key: diff.AttrTruncated, Value: "true"})
	case alias && len(snap) > 0:
		msg = unsafe.String(&snap[0], len(snap))
	default:
		msg = string(snap)
	}
	return aggregator.Log{Time: at, Type: aggregator.LogTypeSnapshot, Message: msg, Attributes: attrs}
}

// NoteLog is a diff log that carries no change: op is OpNone, OpUnavailable or OpTruncated.
func NoteLog(at time.Time, op, msg string) aggregator.Log {
	return aggregator.Log{Time: at, Type: aggregator.LogTypeDiff, Message: msg, Attributes: aggregator.Attrs{{Key: diff.AttrOp, Value: op}}}
}

package diff

import (
	"fmt"
	"time"

	"github.com/kelemetry/kelemetry/aggregator"
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

// LogFormat returns the log bounds of c (defaults for zero fields).
func (c StreamConfig) LogFormat() LogFormat {
	c = c.WithDefaults()
	return LogFormat{MaxChanges: c.MaxChanges, MaxValueBytes: c.MaxValueBytes, MaxSnapshotBytes: c.MaxSnapshotBytes}
}

// WithDefaults returns f with zero fields set to the defaults of StreamConfig.
func (f LogFormat) WithDefaults() LogFormat {
	if f.MaxChanges == 0 {
		f.MaxChanges = DefaultMaxChanges
	}
	if f.MaxValueBytes == 0 {
		f.MaxValueBytes = DefaultMaxValueBytes
	}
	if f.MaxSnapshotBytes == 0 {
		f.MaxSnapshotBytes = DefaultMaxSnapshotBytes
	}
	return f
}

// ChangeLogs renders changes as logs of type aggregator.LogTypeDiff, one per change (message
// "<path> <old> -> <new>", attributes AttrPath, AttrOp, AttrOld, AttrNew), at most MaxChanges,
// then one OpTruncated log counting the rest. f must have its defaults set.
func (f LogFormat) ChangeLogs(at time.Time, changes []Change) []aggregator.Log {
	n := min(len(changes), f.MaxChanges)
	logs := make([]aggregator.Log, 0, n+1)
	maxAttr := 4 * f.MaxValueBytes
	backing := make(aggregator.Attrs, 0, 5*n)
	for _, c := range changes[:n] {
		attrs := backing[len(backing) : len(backing) : len(backing)+5]
		attrs = append(attrs, aggregator.Attr{Key: AttrPath, Value: c.Path}, aggregator.Attr{Key: AttrOp, Value: string(c.Op)})
		truncated := false
		for _, kv := range [...]struct {
			key string
			v   []byte
		}{{AttrOld, c.Old}, {AttrNew, c.New}} {
			switch {
			case kv.v == nil:
			case len(kv.v) > maxAttr:
				truncated = true
			default:
				attrs = append(attrs, aggregator.Attr{Key: kv.key, Value: string(kv.v)})
			}
		}
		if c.Redacted {
			attrs = append(attrs, aggregator.Attr{Key: AttrRedacted, Value: "true"})
		}
		if truncated {
			attrs = append(attrs, aggregator.Attr{Key: AttrTruncated, Value: "true"})
		}
		backing = backing[:len(backing)+len(attrs)]
		logs = append(logs, aggregator.Log{Time: at, Type: aggregator.LogTypeDiff, Message: c.Line(f.MaxValueBytes), Attributes: attrs})
	}
	if rest := len(changes) - n; rest > 0 {
		logs = append(logs, aggregator.Log{Time: at, Type: aggregator.LogTypeDiff,
			Message:    fmt.Sprintf("%d more changes not shown", rest),
			Attributes: aggregator.Attrs{{Key: AttrOp, Value: OpTruncated}}})
	}
	return logs
}

// SnapshotLog renders a snapshot as a log of type aggregator.LogTypeSnapshot: kind is "creation"
// or "deletion" (AttrSnapshotKind), source where it came from (AttrSnapshotSource), rv its
// resourceVersion (AttrSnapshotRV, left out when empty). A snapshot larger than MaxSnapshotBytes
// is replaced by a note. f must have its defaults set.
func (f LogFormat) SnapshotLog(at time.Time, kind, source, rv string, snap []byte) aggregator.Log {
	attrs := aggregator.Attrs{{Key: AttrSnapshotKind, Value: kind}, {Key: AttrSnapshotSource, Value: source}}
	if rv != "" {
		attrs = append(attrs, aggregator.Attr{Key: AttrSnapshotRV, Value: rv})
	}
	msg := string(snap)
	if len(snap) > f.MaxSnapshotBytes {
		msg = fmt.Sprintf("%s snapshot omitted: %d bytes (more than %d)", kind, len(snap), f.MaxSnapshotBytes)
		attrs = append(attrs, aggregator.Attr{Key: AttrTruncated, Value: "true"})
	}
	return aggregator.Log{Time: at, Type: aggregator.LogTypeSnapshot, Message: msg, Attributes: attrs}
}

// NoteLog is a diff log that carries no change: op is OpNone, OpUnavailable or OpTruncated.
func NoteLog(at time.Time, op, msg string) aggregator.Log {
	return aggregator.Log{Time: at, Type: aggregator.LogTypeDiff, Message: msg, Attributes: aggregator.Attrs{{Key: AttrOp, Value: op}}}
}

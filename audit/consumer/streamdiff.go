package consumer

import (
	"context"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/internal/objdiff"
)

// streamDiff is the audit-stream diff: it adds to each successful write the changes since the
// previous version of the object seen in the stream (RequestResponse-level auditing), or a
// creation or deletion snapshot; see objdiff.Stream.
type streamDiff struct {
	*objdiff.Stream
}

// add adds the audit-stream diff of a successful write to out: diff or snapshot logs, see
// objdiff.Stream. It never waits.
func (s streamDiff) add(ctx context.Context, ev *auditv1.Event, out *aggregator.Event, info *convertInfo) {
	s.observe(ctx, write(ev, out, info), out)
}

// warm records the version of a write that was handled elsewhere (see Consumer.Warm).
func (s streamDiff) warm(ctx context.Context, ev *auditv1.Event, out *aggregator.Event, info *convertInfo) {
	s.Warm(ctx, write(ev, out, info))
}

// write is the objdiff.Write of a successful write.
func write(ev *auditv1.Event, out *aggregator.Event, info *convertInfo) objdiff.Write {
	ref := ev.ObjectRef
	return objdiff.Write{
		Object:                 out.Object.ObjectRef,
		Verb:                   ev.Verb,
		Subresource:            ref.Subresource,
		RequestResourceVersion: ref.ResourceVersion,
		Request:                ev.RequestObject,
		Response:               ev.ResponseObject,
		Snapshot:               out.Object.Body,
		SnapshotLayout:         info.layout,
		IsObject:               info.isObject,
		MetadataOnly:           info.metadataOnly,
		Final:                  completesDeletion(out),
		ResourceVersion:        info.meta.ResourceVersion,
		Time:                   out.End,
	}
}

// observe adds the diff of w to out.
func (s streamDiff) observe(ctx context.Context, w objdiff.Write, out *aggregator.Event) {
	res := s.Observe(ctx, w)
	if len(res.Logs) > 0 {
		out.Logs = append(out.Logs, res.Logs...)
	}
	if len(res.Attributes) > 0 {
		out.Attributes = append(out.Attributes, res.Attributes...)
	}
}

// completesDeletion reports whether out removed the last finalizer of an object marked for
// deletion (see converter.deletionState).
func completesDeletion(out *aggregator.Event) bool {
	v, _ := out.Attributes.Get(attrDeletion)
	return v == deletionCompleted
}

package query

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// Ad-hoc merge: several results (any objects, any clusters) shown as one trace on one time
// axis (JaegerAPI).
//
//	GET /api/traces/{mergeID}            the merged trace, as Jaeger UI fetches /trace/{mergeID}
//	GET /api/traces?traceID={mergeID}    the same through the lookup
//	GET /api/traces/merge?id=&id=...     the merged trace of the member IDs; its traceID is the
//	                                     merge ID
//
// A merge ID is its member IDs, each written as 32 hex digits, concatenated in order: 2 to
// maxMergeMembers members, so 64 to 640 hex digits. A member is any ID GET /api/traces/{id}
// answers: a display ID (in the mode it names) or a stored trace ID. The merged trace has a
// synthetic root span ("merged: N traces", kelemetry.span.kind=merge) spanning every member, with each member's root
// under it, tagged kelemetry.merge.member with the member's ID; span IDs that two members share
// (an object in both) are renamed in the later member, and the warnings of each member are kept
// with the member's ID in front. The members share the request's render budget; a truncation of
// any member is also marked on the merged trace as is, so the answer says it is truncated.

// maxMergeMembers bounds the members of a merge, and so the length of a merge ID.
const maxMergeMembers = 20

// errBadMerge is wrapped by the errors of parseMergeID and MergeTrace for a malformed merge.
var errBadMerge = errors.New("bad merge")

// mergeID writes the merge ID of ids.
func mergeID(ids []trace.TraceID) string {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(id.String())
	}
	return b.String()
}

// parseMergeID reads a merge ID: 2 to maxMergeMembers member IDs of 32 hex digits each.
func parseMergeID(s string) ([]trace.TraceID, error) {
	if len(s) <= 32 || len(s)%32 != 0 {
		return nil, fmt.Errorf("%w: an ID of %d hex digits: a trace ID has at most 32 hex digits, a merge ID a multiple of 32, at least 64",
			errBadMerge, len(s))
	}
	if n := len(s) / 32; n > maxMergeMembers {
		return nil, fmt.Errorf("%w: %d members, at most %d", errBadMerge, n, maxMergeMembers)
	}
	ids := make([]trace.TraceID, 0, len(s)/32)
	for i := 0; i < len(s); i += 32 {
		id, err := ParseTraceID(s[i : i+32])
		if err != nil {
			return nil, fmt.Errorf("%w: member %d: %w", errBadMerge, i/32+1, err)
		}
		ids = append(ids, id)
	}
	return ids, checkMembers(ids)
}

func checkMembers(ids []trace.TraceID) error {
	if len(ids) < 2 {
		return fmt.Errorf("%w: %d members, at least 2", errBadMerge, len(ids))
	}
	if len(ids) > maxMergeMembers {
		return fmt.Errorf("%w: %d members, at most %d", errBadMerge, len(ids), maxMergeMembers)
	}
	for i, id := range ids {
		if slices.Contains(ids[:i], id) {
			return fmt.Errorf("%w: member %s given twice", errBadMerge, id)
		}
	}
	return nil
}

// MergeTrace draws the members (IDs as Trace resolves them) as one trace whose ID is their
// merge ID. It returns an error wrapping errBadMerge for a bad member count, and the error of
// the first member that cannot be drawn (wrapping ErrTraceNotFound or ErrBadTraceID, with the
// member named).
func (a *JaegerAPI) MergeTrace(ctx context.Context, ids []trace.TraceID) (JaegerTrace, error) {
	return a.mergeTrace(ctx, ids, newRenderBudget(ctx, a.cfg.MaxRenderBytes))
}

func (a *JaegerAPI) mergeTrace(ctx context.Context, ids []trace.TraceID, b *renderBudget) (JaegerTrace, error) {
	if err := checkMembers(ids); err != nil {
		return JaegerTrace{}, err
	}
	mid := mergeID(ids)
	out := JaegerTrace{TraceID: mid, Spans: []JaegerSpan{}, Processes: map[string]JaegerProcess{}, Warnings: []string{}}
	rootID := hashID("merge", mid).String()
	out.Processes["merge"] = JaegerProcess{ServiceName: "merge", Tags: []JaegerKeyValue{}}
	root := JaegerSpan{TraceID: mid, SpanID: rootID, OperationName: fmt.Sprintf("merged: %d traces", len(ids)),
		References: []JaegerReference{}, Logs: []JaegerLog{}, ProcessID: "merge",
		Tags: []JaegerKeyValue{str("kelemetry.span.kind", "merge"), str("kelemetry.merge.id", mid)}}
	out.Spans = append(out.Spans, root)
	used := map[string]bool{rootID: true}
	var start, end int64
	first := true
	var cut truncation
	for i, id := range ids {
		tr, err := a.trace(ctx, id, b)
		if err != nil {
			return JaegerTrace{}, fmt.Errorf("member %s: %w", id, err)
		}
		member := id.String()
		for _, w := range tr.Warnings {
			out.Warnings = append(out.Warnings, member+": "+w)
		}
		cut.fromTraces([]JaegerTrace{tr})
		for pid, p := range tr.Processes {
			out.Processes["m"+strconv.Itoa(i+1)+pid] = p
		}
		rename := map[string]string{}
		for _, s := range tr.Spans {
			nid := s.SpanID
			for n := 0; used[nid]; n++ {
				nid = hashID("merge", member, s.SpanID, strconv.Itoa(n)).String()
			}
			used[nid] = true
			rename[s.SpanID] = nid
		}
		for _, s := range tr.Spans {
			s.TraceID, s.SpanID, s.ProcessID = mid, rename[s.SpanID], "m"+strconv.Itoa(i+1)+s.ProcessID
			refs := make([]JaegerReference, 0, len(s.References)+1)
			for _, r := range s.References {
				if nid, ok := rename[r.SpanID]; ok {
					refs = append(refs, JaegerReference{RefType: r.RefType, TraceID: mid, SpanID: nid})
				}
			}
			if len(refs) == 0 {
				refs = append(refs, JaegerReference{RefType: "CHILD_OF", TraceID: mid, SpanID: rootID})
				s.Tags = append(slices.Clone(s.Tags), str("kelemetry.merge.member", jaegerTraceID(id)))
			}
			s.References = refs
			if first || s.StartTime < start {
				start = s.StartTime
			}
			if e := s.StartTime + s.Duration; first || e > end {
				end = e
			}
			first = false
			out.Spans = append(out.Spans, s)
		}
	}
	out.Spans[0].StartTime, out.Spans[0].Duration = start, max(end-start, 0)
	for _, msg := range cut.msgs {
		markTruncated(&out, msg, false)
	}
	return out, nil
}

// mergeMembers reads the id parameters of GET /api/traces/merge.
func mergeMembers(vals []string) ([]trace.TraceID, error) {
	var ids []trace.TraceID
	for _, v := range vals {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}
			id, err := ParseTraceID(s)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", errBadMerge, err)
			}
			ids = append(ids, id)
		}
	}
	return ids, checkMembers(ids)
}

// merge answers GET /api/traces/merge?id=&id=.
func (a *JaegerAPI) merge(w http.ResponseWriter, r *http.Request) {
	ids, err := mergeMembers(r.URL.Query()["id"])
	if err != nil {
		jaegerError(w, http.StatusBadRequest, "%v", err)
		return
	}
	a.writeMerge(w, r, ids)
}

// writeMerge draws and writes the merge of ids.
func (a *JaegerAPI) writeMerge(w http.ResponseWriter, r *http.Request, ids []trace.TraceID) {
	tr, err := a.MergeTrace(r.Context(), ids)
	a.writeOneTrace(w, r, tr, err, "merge traces", mergeID(ids))
}

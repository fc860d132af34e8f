package jaeger

import (
	"context"
	"math"
	"time"

	"github.com/kelemetry/kelemetry/storageapi/storagev2"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/changefeed"
	"github.com/kelemetry/kelemetry/store/internal/query"
)

// ChangeFeed returns the store's change feed (internal/changefeed). The backend keeps no index
// of writes: a query searches the audit service's traces of its range (at most searchDepth
// traces: a page cut there says so with ScanCut, and its cursor goes on from the oldest change
// read) and reads them whole. The live tail follows the writes this process exports.
func (j *Store) ChangeFeed() *changefeed.Feed { return j.feed }

// findChanges answers the feed's queries through a search of the audit event spans.
func (j *Store) findChanges(ctx context.Context, q changefeed.Query) (changefeed.Page, error) {
	var attrs []*storagev2.KeyValue
	if len(q.Verbs) == 1 {
		attrs = append(attrs, stringKV(aggregator.AttrVerb, q.Verbs[0]))
	}
	from, to := q.From, q.To
	if to.IsZero() {
		to = j.now().Add(query.DefaultMaxFutureSkew)
	}
	if !q.Before.IsZero() && q.Before.Time.Before(to) {
		to = q.Before.Time.Add(time.Nanosecond)
	}
	ctx2, cancel := context.WithTimeout(ctx, j.cfg.Timeout)
	resp, err := j.client.FindTraceIDs(ctx2, &storagev2.FindTracesRequest{Query: &storagev2.TraceQueryParameters{
		ServiceName: "audit", Attributes: attrs, StartTimeMin: timestamppb.New(from), StartTimeMax: timestamppb.New(to),
		SearchDepth: int32(min(j.cfg.SearchDepth, math.MaxInt32)),
	}})
	cancel()
	if err != nil {
		return changefeed.Page{}, j.readError(ctx, "FindTraceIDs", err)
	}
	j.ok(ctx, "FindTraceIDs")
	found := resp.GetTraceIds()
	cut := len(found) >= j.cfg.SearchDepth
	ws := make([]query.ObjectWindow, 0, len(found))
	for _, f := range found {
		var id trace.TraceID
		if len(f.GetTraceId()) != len(id) {
			continue
		}
		copy(id[:], f.GetTraceId())
		w := aggregator.WindowStart(f.GetStart().AsTime(), j.window)
		if _, tw, ok := aggregator.ParseTraceID(id); ok {
			w = tw
		}
		ws = append(ws, query.ObjectWindow{Window: w, TraceID: id})
	}
	traces, err := j.GetTraces(ctx, ws)
	if err != nil {
		return changefeed.Page{}, err
	}
	var all []changefeed.Change
	for _, spans := range traces {
		for _, sp := range spans {
			if c, ok := changefeed.FromSpan(sp); ok {
				c.Diff = nil
				all = append(all, c)
			}
		}
	}
	changefeed.Sort(all)
	i := 0
	page, err := changefeed.Collect(q, func() (time.Time, trace.SpanID, func() (changefeed.Change, error), bool, error) {
		if i == len(all) {
			return time.Time{}, trace.SpanID{}, nil, false, nil
		}
		c := all[i]
		i++
		return c.Time, c.SpanID, func() (changefeed.Change, error) { return c, nil }, true, nil
	}, nil)
	if err == nil && cut && page.Next.IsZero() && len(all) > 0 {
		// The search stopped at searchDepth traces: older changes may be in traces it did not
		// return.
		page.ScanCut, page.Next = true, changefeed.CursorOf(&all[len(all)-1])
		j.truncated.Add(ctx, 1)
	}
	return page, err
}

package query

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/diff"
	"github.com/kelemetry/kelemetry/internal/objdiff"
	"github.com/kelemetry/kelemetry/store"
)

// The moments of an object's stored history (NativeAPI), the positions of the UI's time slider:
//
//	GET /api/objects/history?cluster=&group=&resource=&namespace=&name=&from=&to=
//	GET /api/objects/{cluster}/{group}/{resource}/{namespace}/{name}/history?from=&to=
//
// from and to (RFC 3339 or Unix milliseconds) are optional; without them the whole stored
// history is read, within the span budget (Config.MaxSpans).

// historyMoment is one stored write of an object: a moment after which GET /api/objects/at
// answers another reconstruction. Time is the time the write's diff or snapshot is stored at:
// passed as is to /api/objects/at, it shows the object just after the write.
type historyMoment struct {
	Time time.Time `json:"time"`
	// Event is the write's event name, e.g. "deployment-controller update".
	Event string `json:"event"`
	// Snapshot says a whole object is stored at this write (its creation, its deletion).
	Snapshot bool `json:"snapshot"`
	// Changes counts the field changes stored for the write; Gap says some are missing (a
	// diff that could not be computed, a snapshot too large to store).
	Changes int  `json:"changes"`
	Gap     bool `json:"gap,omitempty"`
	// ResourceVersion is the object's version after the write, when stored.
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// objectHistory is the answer of GET /api/objects/history: an object's writes whose request
// overlaps [From, To] (received at or before To, stored at or after From), oldest first. A view
// that knows an event by its start (the UI's folded events) so finds the write it drew.
type objectHistory struct {
	Object  aggregator.ObjectKey `json:"object"`
	From    time.Time            `json:"from"`
	To      time.Time            `json:"to"`
	Moments []historyMoment      `json:"moments"`
	// Truncated is set when the span budget or the render budget (Config.MaxRenderBytes, spent
	// by the moments) ran out: Moments then holds the oldest writes only.
	Truncated string `json:"truncated,omitempty"`
}

// objectHistoryBetween lists the stored writes of key whose request overlaps [from, to] (zero
// times: unbounded),
// reading its windows oldest first within Config.MaxSpans and listing moments within
// Config.MaxRenderBytes. It returns an error wrapping
// errNoObject when nothing of the object is stored in the range.
func objectHistoryBetween(ctx context.Context, r store.Reader, cfg Config, key aggregator.ObjectKey, from, to time.Time) (objectHistory, error) {
	cfg = cfg.WithDefaults()
	out := objectHistory{Object: key, From: from.UTC(), To: to.UTC(), Moments: []historyMoment{}}
	found, err := r.FindObjects(ctx, store.ObjectQuery{Cluster: key.Cluster, Group: key.Group, Resource: key.Resource,
		Namespace: key.Namespace, Name: key.Name, From: from, To: to, Limit: 1, Exact: true})
	if err != nil {
		return out, fmt.Errorf("find object: %w", err)
	}
	if len(found) == 0 || len(found[0].Windows) == 0 {
		return out, fmt.Errorf("%s: %w", key, errNoObject)
	}
	windows := found[0].Windows
	var writes []historyWrite
	spans := 0
	for start := 0; start < len(windows); start += readChunk {
		if spans >= cfg.MaxSpans {
			out.Truncated = spanBudgetMsg(cfg.MaxSpans)
			break
		}
		traces, err := r.GetTraces(ctx, windows[start:min(start+readChunk, len(windows))])
		if err != nil {
			return out, fmt.Errorf("read history: %w", err)
		}
		for _, tr := range traces {
			spans += len(tr)
			for _, sp := range tr {
				w, ok := writeOf(sp)
				if !ok {
					continue
				}
				received := w.at
				if !w.start.IsZero() && w.start.Before(received) {
					received = w.start
				}
				if (!from.IsZero() && w.at.Before(from)) || (!to.IsZero() && received.After(to)) {
					continue
				}
				writes = append(writes, w)
			}
		}
		if !chargeRead(ctx, traces) {
			out.Truncated = ticketOf(ctx).memoryMessage()
			break
		}
	}
	sortWrites(writes)
	b := newRenderBudget(ctx, cfg.MaxRenderBytes)
	for _, w := range writes {
		m := historyMoment{Time: w.at.UTC(), Event: w.name, Snapshot: w.snap != nil, Gap: w.partial, ResourceVersion: w.newRV}
		for _, l := range w.logs {
			switch op, _ := l.Attributes.Get(diff.AttrOp); op {
			case string(objdiff.OpAdd), string(objdiff.OpRemove), string(objdiff.OpReplace):
				m.Changes++
			case diff.OpNone:
			default:
				m.Gap = true
			}
		}
		if !b.take(m, false) {
			out.Truncated = joinNonEmptyMsg(out.Truncated, b.message())
			break
		}
		out.Moments = append(out.Moments, m)
	}
	return out, nil
}

func (a *NativeAPI) objectHistory(w http.ResponseWriter, r *http.Request) {
	key, err := objectKeyOf(r)
	if err != nil {
		jaegerError(w, http.StatusBadRequest, "%v", err)
		return
	}
	var bounds [2]time.Time
	for i, name := range []string{"from", "to"} {
		if s := r.URL.Query().Get(name); s != "" {
			if bounds[i], err = parseMoment(name, s); err != nil {
				jaegerError(w, http.StatusBadRequest, "%v", err)
				return
			}
		}
	}
	if !bounds[0].IsZero() && !bounds[1].IsZero() && bounds[1].Before(bounds[0]) {
		jaegerError(w, http.StatusBadRequest, "'to' is before 'from'")
		return
	}
	h, err := objectHistoryBetween(r.Context(), a.reader, a.cfg, key, bounds[0], bounds[1])
	if err != nil {
		a.objectError(w, err)
		return
	}
	if h.Truncated != "" {
		a.metrics.truncated.Add(r.Context(), 1, metric.WithAttributes(a.metrics.api))
	}
	writeJSON(w, http.StatusOK, jaegerResponse{Data: h, Total: len(h.Moments)})
}

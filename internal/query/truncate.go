package query

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// renderBudget is what one request may still render, in bytes of JSON. It measures each
// value by encoding it once into a counter, and charges what it takes to the request's memory
// admission (the drawn result is held until it is written; see renderFactorNum).
type renderBudget struct {
	limit, used int64
	exhausted   bool
	counter     byteCounter
	enc         *json.Encoder
	mem         *ticket
	scratch     []byte // a span's JSON (appendSpanJSON), measured without encoding/json
}

type byteCounter struct{ n int64 }

func (c *byteCounter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// newRenderBudget is a render budget of limit bytes for ctx's request.
func newRenderBudget(ctx context.Context, limit int64) *renderBudget {
	b := &renderBudget{limit: limit, mem: ticketOf(ctx)}
	b.enc = json.NewEncoder(&b.counter)
	return b
}

// take spends the size of v and reports true, or reports false (and marks the budget
// exhausted) when v does not fit. force spends it anyway: the root of a trace is always drawn.
func (b *renderBudget) take(v any, force bool) bool {
	if b == nil {
		return true
	}
	if b.exhausted && !force {
		return false
	}
	b.counter.n = 0
	if sp, ok := v.(*JaegerSpan); ok {
		// What Encode would write: the JSON and a newline.
		b.scratch = appendSpanJSON(b.scratch[:0], sp)
		b.counter.n = int64(len(b.scratch)) + 1
	} else if err := b.enc.Encode(v); err != nil {
		return false
	}
	if !force && b.used+b.counter.n > b.limit {
		b.exhausted = true
		return false
	}
	b.used += b.counter.n
	// Counted, never refused: the reads of the request stopped when its memory ran out, and
	// what was read can be drawn within limit.
	b.mem.chargeRender(b.counter.n * renderFactorNum / renderFactorDen)
	if b.used > b.limit {
		b.exhausted = true // a forced value went past the limit: nothing more fits
	}
	return true
}

// message is the truncation message of an exhausted budget.
func (b *renderBudget) message() string {
	return renderBudgetMsg(b.limit)
}

// truncatedPrefix starts every truncation message.
const truncatedPrefix = "result truncated: "

func renderBudgetMsg(limit int64) string {
	size := fmt.Sprintf("%d bytes", limit)
	if limit >= 1<<20 && limit%(1<<20) == 0 {
		size = fmt.Sprintf("%d MiB", limit>>20)
	}
	return "result truncated: render budget of " + size + " reached; narrow the time range"
}

// markTruncated makes a truncation visible where stock Jaeger UI shows it: in the trace's and
// its first span's warnings and, with marker, as a span named by the message under the first
// span (the root of a drawn tree).
func markTruncated(tr *JaegerTrace, msg string, marker bool) {
	tr.Warnings = append(tr.Warnings, msg)
	if len(tr.Spans) == 0 {
		return
	}
	root := &tr.Spans[0]
	root.Warnings = append(root.Warnings, msg)
	if !marker {
		return
	}
	tr.Spans = append(tr.Spans, JaegerSpan{
		TraceID: tr.TraceID, SpanID: hashID("truncated", msg).String(), OperationName: msg,
		References: []JaegerReference{{RefType: "CHILD_OF", TraceID: tr.TraceID, SpanID: root.SpanID}},
		StartTime:  root.StartTime, Tags: []JaegerKeyValue{str("kelemetry.span.kind", "truncated")},
		Logs: []JaegerLog{}, ProcessID: root.ProcessID, Warnings: []string{msg},
	})
}

// renderWithin draws g like Render, spending b (nil: unbounded). What the budget or the
// engine's budgets left out is marked (markTruncated).
func renderWithin(g *Graph, d displayMode, id trace.TraceID, b *renderBudget) JaegerTrace {
	pl := pipelines[d]
	root := build(g, pl.foldEvents)
	for _, s := range pl.steps {
		root = s(root)
	}
	tr := toJaeger(jaegerTraceID(id), root, b)
	if g.Truncated != "" {
		markTruncated(&tr, g.Truncated, true)
	}
	if b != nil && b.exhausted {
		markTruncated(&tr, b.message(), true)
	}
	return tr
}

// truncation collects the truncation messages of one response, each once.
type truncation struct{ msgs []string }

func (t *truncation) add(msg string) {
	if msg == "" {
		return
	}
	for _, m := range t.msgs {
		if m == msg {
			return
		}
	}
	t.msgs = append(t.msgs, msg)
}

// fromTraces adds the truncation warnings of drawn traces.
func (t *truncation) fromTraces(list []JaegerTrace) {
	for _, tr := range list {
		for _, w := range tr.Warnings {
			if strings.HasPrefix(w, truncatedPrefix) {
				t.add(w)
			}
		}
	}
}

// apply puts the messages into the envelope (errors and truncated) and a response header.
func (t *truncation) apply(w http.ResponseWriter, resp *jaegerResponse) bool {
	if len(t.msgs) == 0 {
		return false
	}
	resp.Truncated = t.msgs[0]
	for _, m := range t.msgs {
		resp.Errors = append(resp.Errors, JaegerError{Msg: m})
	}
	w.Header().Set("X-Kelemetry-Truncated", t.msgs[0])
	return true
}

// writeTraces writes a response whose data are traces span by span, so that a large answer is
// never held whole in one buffer. The bytes are those json.Marshal gives for resp (and a
// newline, as writeJSON ends with).
func writeTraces(w http.ResponseWriter, code int, resp jaegerResponse, traces []JaegerTrace) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	bw := bufio.NewWriterSize(w, 64<<10)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	put := func(v any) bool {
		buf.Reset()
		if err := enc.Encode(v); err != nil {
			return false
		}
		_, err := bw.Write(bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}))
		return err == nil
	}
	raw := func(s string) bool { _, err := bw.WriteString(s); return err == nil }
	var span []byte // one span's JSON (appendSpanJSON: as put would write it, without reflection)
	ok := raw(`{"data":`)
	if traces == nil {
		ok = ok && raw("null")
	} else {
		ok = ok && raw("[")
		for i := range traces {
			tr := &traces[i]
			if i > 0 {
				ok = ok && raw(",")
			}
			ok = ok && raw(`{"traceID":`) && put(tr.TraceID) && raw(`,"spans":`)
			if tr.Spans == nil {
				ok = ok && raw("null")
			} else {
				ok = ok && raw("[")
				for j := range tr.Spans {
					if j > 0 {
						ok = ok && raw(",")
					}
					if ok {
						span = appendSpanJSON(span[:0], &tr.Spans[j])
						_, err := bw.Write(span)
						ok = err == nil
					}
				}
				ok = ok && raw("]")
			}
			ok = ok && raw(`,"processes":`) && put(tr.Processes) && raw(`,"warnings":`) && put(tr.Warnings) && raw("}")
		}
		ok = ok && raw("]")
	}
	// The rest of the envelope, without data, spliced after it.
	resp.Data = nil
	buf.Reset()
	if err := enc.Encode(resp); err != nil || !ok {
		return
	}
	rest := bytes.TrimPrefix(buf.Bytes(), []byte(`{"data":null`))
	_, _ = bw.Write(rest)
	_ = bw.Flush()
}

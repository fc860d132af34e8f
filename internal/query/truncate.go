package query

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/internal/parallel"
)

// renderBudget is what one request may still render, in bytes of JSON. It measures each
// value by encoding it once into a counter, and charges what it takes to the request's memory
// admission (the drawn result is held until it is written; see renderFactorNum).
type renderBudget struct {
	limit, used int64
	spans       int64 // the spans taken (takeSpans): used/spans sizes the buffers of the next
	exhausted   bool
	counter     byteCounter
	enc         *json.Encoder
	mem         *ticket
}

type byteCounter struct{ n int64 }

func (c *byteCounter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// newRenderBudget is a render budget of limit bytes for ctx's request.
func newRenderBudget(ctx context.Context, limit int64) *renderBudget {
	b := &renderBudget{limit: limit, mem: ticketOf(ctx)}
	b.enc = json.NewEncoder(&b.counter)
	return b
}

// take spends the size of v (spans: takeSpans) and reports true, or reports false (and marks the budget
// exhausted) when v does not fit. force spends it anyway: the root of a trace is always drawn.
func (b *renderBudget) take(v any, force bool) bool {
	if b == nil {
		return true
	}
	if b.exhausted && !force {
		return false
	}
	b.counter.n = 0
	if err := b.enc.Encode(v); err != nil {
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

// takeSpans spends the sizes of spans, the next ones drawn, in order, as take does each (the
// first forced when force is set), and returns how many fit. It measures them a chunk at a time
// (renderBudget.chunk), in parallel when there are many.
func (b *renderBudget) takeSpans(spans []JaegerSpan, force bool) int {
	if b == nil {
		return len(spans)
	}
	taken := 0
	for taken < len(spans) {
		n := min(len(spans)-taken, b.chunk())
		k := b.takeChunk(spans[taken:taken+n], force && taken == 0)
		taken += k
		if k < n {
			break
		}
	}
	return taken
}

// chunk is how many spans to draw and measure at once: about what the budget has left, by the
// mean size of the spans taken so far, and about spanChunkBytes of JSON, within
// [minSpanChunk, maxSpanChunk].
func (b *renderBudget) chunk() int {
	if b == nil || b.spans == 0 {
		return minSpanChunk
	}
	mean := max(b.used/b.spans, 1)
	return int(min(max(min(b.limit-b.used, spanChunkBytes)/mean, minSpanChunk), maxSpanChunk))
}

// Chunks of spans measured (and written) at once.
const (
	minSpanChunk   = 64
	maxSpanChunk   = 4096
	spanChunkBytes = 4 << 20
)

// takeChunk is takeSpans for one chunk.
func (b *renderBudget) takeChunk(spans []JaegerSpan, force bool) int {
	if b.exhausted && !force {
		return 0
	}
	sizes := make([]int64, len(spans))
	inParallel(len(spans), minParallelSpans, func(lo, hi int) {
		var buf []byte
		for i := lo; i < hi; i++ {
			buf = appendSpanJSON(buf[:0], &spans[i])
			sizes[i] = int64(len(buf)) + 1 // what Encode would write: the JSON and a newline
		}
	})
	for i, n := range sizes {
		if !(force && i == 0) && (b.exhausted || b.used+n > b.limit) {
			b.exhausted = true
			return i
		}
		b.used += n
		b.spans++
		b.mem.chargeRender(n * renderFactorNum / renderFactorDen)
		if b.used > b.limit {
			b.exhausted = true
		}
	}
	return len(spans)
}

// minParallelSpans is the least number of spans per goroutine that takeSpans encodes at once.
const minParallelSpans = 256

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
	var parts [][]byte // the buffers of appendSpansJSON, kept from trace to trace
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
				parts = appendSpansJSON(tr.Spans, parts, func(b []byte) bool {
					if ok {
						_, err := bw.Write(b)
						ok = err == nil
					}
					return ok
				})
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

// appendSpansJSON calls write with the JSON of spans joined by commas (appendSpanJSON: as
// encoding/json would write them, without reflection), in pieces, and returns the buffers it
// used for the next call. The spans are encoded a chunk of about spanChunkBytes at a time, the
// chunk's parts in parallel when there are many; it stops at the first write that returns false.
func appendSpansJSON(spans []JaegerSpan, bufs [][]byte, write func([]byte) bool) [][]byte {
	chunk, done, written := minSpanChunk, 0, 0
	for done < len(spans) {
		n := min(chunk, len(spans)-done)
		for len(bufs) < runtime.GOMAXPROCS(0) {
			bufs = append(bufs, nil)
		}
		parts := parallel.Parts(n, minParallelSpans, 0, func(k, lo, hi int) {
			buf := bufs[k][:0]
			for i := done + lo; i < done+hi; i++ {
				if i > 0 {
					buf = append(buf, ',')
				}
				buf = appendSpanJSON(buf, &spans[i])
			}
			bufs[k] = buf
		})
		for _, buf := range bufs[:parts] {
			written += len(buf)
			if len(buf) > 0 && !write(buf) {
				return bufs
			}
		}
		done += n
		chunk = min(max(spanChunkBytes/max(written/done, 1), minSpanChunk), maxSpanChunk)
	}
	return bufs
}

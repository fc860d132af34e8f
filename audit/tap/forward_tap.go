package tap

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/kelemetry/kelemetry/audit/webhook"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/kelemetry/kelemetry/internal/jsonscan"
)

// eachItem calls fn with the raw JSON of each item of the EventList body, in order, skipping
// the indexes in dropped (increasing). The raw item is valid only during the call. want is the
// number of items the webhook decoded (negative: unknown); another count is an error. If the list
// repeats its items member, the last one counts (as for DecodeEventList).
func eachItem(body []byte, dropped []int, want int, fn func(raw []byte) error) error {
	items, err := rawListItems(body)
	if err != nil {
		return err
	}
	if want >= 0 && len(items) != want {
		return fmt.Errorf("event list: %d items, the webhook decoded %d", len(items), want)
	}
	for i, raw := range items {
		if len(dropped) > 0 && dropped[0] == i {
			dropped = dropped[1:]
			continue
		}
		if err := fn(raw); err != nil {
			return err
		}
	}
	return nil
}

// rawListItems returns the raw items of an EventList body; they alias body. body was accepted
// by DecodeEventList: one pass that follows strings and nesting finds the items, and anything
// unexpected is an error rather than a guess.
func rawListItems(body []byte) ([][]byte, error) {
	var items [][]byte
	var key []byte // the last member name of the top-level object
	depth, start := 0, -1
	inItems := false // inside the items array
	object := false  // the top-level object was seen
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case depth == 0 && c != '{' && !isJSONSpace(c), depth == 0 && c == '{' && object,
			depth == 2 && inItems && c != '{' && c != ',' && c != ']' && !isJSONSpace(c):
			return nil, fmt.Errorf("event list: unexpected %q at offset %d", c, i)
		case depth == 0 && c == '{':
			object = true
		}
		switch c {
		case '"':
			end := jsonStringEnd(body, i)
			if end < 0 {
				return nil, fmt.Errorf("event list: unterminated string at offset %d", i)
			}
			if depth == 1 {
				if j := skipJSONSpace(body, end+1); j < len(body) && body[j] == ':' {
					if bytes.IndexByte(body[i+1:end], '\\') >= 0 {
						return rawListItemsEscaped(body) // a member name with escapes: decode it properly
					}
					key = body[i+1 : end]
				}
			}
			i = end
		case '{', '[':
			depth++
			switch {
			case depth == 2 && c == '[' && string(key) == "items":
				inItems, items = true, items[:0] // the last items member counts
			case depth == 3 && inItems && c == '{':
				start = i
			}
		case '}', ']':
			if depth == 3 && inItems && start >= 0 {
				items = append(items, body[start:i+1])
				start = -1
			}
			depth--
			switch {
			case depth < 0:
				return nil, fmt.Errorf("event list: unbalanced %q at offset %d", c, i)
			case depth == 1:
				inItems = false
			}
		}
	}
	if depth != 0 || !object {
		return nil, fmt.Errorf("event list: %w", io.ErrUnexpectedEOF)
	}
	return items, nil
}

// jsonStringEnd returns the index of the quote that ends the string starting at b[i] (-1 if
// none): the first quote not escaped by a backslash (jsonscan.End; body was decoded, so valid).
func jsonStringEnd(b []byte, i int) int { return jsonscan.End(b, i+1) }

func isJSONSpace(c byte) bool { return jsonscan.IsSpace(c) }

func skipJSONSpace(b []byte, i int) int { return jsonscan.SkipSpace(b, i) }

// appendCompactJSON appends raw (valid JSON) to dst without the whitespace outside strings.
func appendCompactJSON(dst, raw []byte) []byte {
	for k := 0; k < len(raw); k++ {
		c := raw[k]
		switch {
		case c == '"':
			end := jsonStringEnd(raw, k)
			if end < 0 {
				end = len(raw) - 1
			}
			dst = append(dst, raw[k:end+1]...)
			k = end
		case !isJSONSpace(c):
			dst = append(dst, c)
		}
	}
	return dst
}

// rawListItemsEscaped is rawListItems for a body whose member names have escapes.
func rawListItemsEscaped(body []byte) ([][]byte, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(body), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, fmt.Errorf("event list: not an object: %w", errors.Join(err, io.ErrUnexpectedEOF))
	}
	var items [][]byte
	for dec.PeekKind() == '"' {
		name, err := dec.ReadToken()
		if err != nil {
			return nil, fmt.Errorf("event list: %w", err)
		}
		if name.String() != "items" || dec.PeekKind() != '[' {
			if err := dec.SkipValue(); err != nil {
				return nil, fmt.Errorf("event list: %w", err)
			}
			continue
		}
		items = items[:0]
		if _, err := dec.ReadToken(); err != nil { // '['
			return nil, fmt.Errorf("event list items: %w", err)
		}
		for dec.PeekKind() == '{' {
			start := dec.InputOffset()
			if err := dec.SkipValue(); err != nil {
				return nil, fmt.Errorf("event list items[%d]: %w", len(items), err)
			}
			raw := bytes.TrimLeft(body[start:dec.InputOffset()], " \t\r\n,")
			items = append(items, raw)
		}
		if tok, err := dec.ReadToken(); err != nil || tok.Kind() != ']' {
			return nil, fmt.Errorf("event list items: want an object: %w", errors.Join(err, io.ErrUnexpectedEOF))
		}
	}
	return items, nil
}

// byteQueue is a FIFO of accepted batches bounded by the bytes of their bodies. It never
// blocks the producer: a batch that does not fit is refused.
type byteQueue struct {
	max int64

	mu      sync.Mutex
	batches []webhook.AcceptedBatch
	bytes   int64
	closed  bool
	wake    chan struct{} // one pending signal: there is something to take
}

func newByteQueue(maxBytes int64) *byteQueue {
	return &byteQueue{max: maxBytes, wake: make(chan struct{}, 1)}
}

// errQueueClosed and errNoRoom are why byteQueue.put refused a batch.
var (
	errQueueClosed = errors.New("stopped")
	errNoRoom      = errors.New("buffer full")
)

// put appends b unless that would exceed the bound or the queue is closed.
func (q *byteQueue) put(b webhook.AcceptedBatch) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.closed:
		return errQueueClosed
	case q.bytes+int64(len(b.Body)) > q.max:
		return errNoRoom
	}
	q.batches = append(q.batches, b)
	q.bytes += int64(len(b.Body))
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return nil
}

// peek returns the oldest batch, which stays queued (and counted) until pop.
func (q *byteQueue) peek() (webhook.AcceptedBatch, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.batches) == 0 {
		return webhook.AcceptedBatch{}, false
	}
	return q.batches[0], true
}

// pop removes the oldest batch and returns its size.
func (q *byteQueue) pop() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.batches) == 0 {
		return 0
	}
	n := int64(len(q.batches[0].Body))
	q.batches[0] = webhook.AcceptedBatch{}
	q.batches = q.batches[1:]
	q.bytes -= n
	if len(q.batches) == 0 {
		q.batches = nil // let the backing array go
	}
	return n
}

// close refuses later puts; what is queued stays for the consumer to drain.
func (q *byteQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
}

// isClosed reports whether close was called.
func (q *byteQueue) isClosed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}

// takeAll empties the queue and returns what it held.
func (q *byteQueue) takeAll() []webhook.AcceptedBatch {
	q.mu.Lock()
	defer q.mu.Unlock()
	rest := q.batches
	q.batches, q.bytes = nil, 0
	return rest
}

// size returns the bytes queued.
func (q *byteQueue) size() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.bytes
}

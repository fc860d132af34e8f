package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// AcceptedBatch is a batch the webhook accepted (answered 200), as a BatchTap sees it.
type AcceptedBatch struct {
	// Cluster is the cluster the batch was accepted for.
	Cluster string
	// Body is the request body as received (decompressed): an audit.k8s.io/v1 EventList. It is
	// never modified nor reused; a tap must not modify it either.
	Body []byte
	// Dropped lists, in increasing order, the indexes of the items of Body that the webhook
	// dropped (for their timestamps); nil when it kept them all.
	Dropped []int
	// Events is the number of items accepted (the items of Body minus Dropped).
	Events int
}

// BatchTap is told about each batch a Webhook accepted, after the batch was enqueued and before
// the 200 is written. Accepted must not block: a tap that does slow work (writing a file,
// sending the batch on) buffers the batch, within a bound, and does it in the background. The
// audit dump (Dumper) and forward (Forwarder) are taps.
type BatchTap interface {
	Accepted(ctx context.Context, b AcceptedBatch)
}

// AddTap makes the webhook tell t about each batch it accepts. Call it before the webhook
// serves requests.
func (w *Webhook) AddTap(t BatchTap) {
	w.taps = append(w.taps, t)
}

// notifyTaps tells the taps about an accepted batch: body as received, received the events it
// decoded (in order) and kept those it enqueued (a subsequence of received).
func (w *Webhook) notifyTaps(ctx context.Context, cluster string, body []byte, received, kept []*Event) {
	if len(w.taps) == 0 || len(kept) == 0 {
		return
	}
	b := AcceptedBatch{Cluster: cluster, Body: body, Events: len(kept)}
	if len(kept) < len(received) {
		j := 0
		for i, ev := range received {
			if j < len(kept) && kept[j] == ev {
				j++
				continue
			}
			b.Dropped = append(b.Dropped, i)
		}
	}
	for _, t := range w.taps {
		t.Accepted(ctx, b)
	}
}

// eachItem calls fn with the raw JSON of each item of the EventList body, in order, skipping
// the indexes in dropped (increasing). The raw item is valid only during the call. If the list
// repeats its items member, the last one counts (as for DecodeEventList).
func eachItem(body []byte, dropped []int, fn func(raw []byte) error) error {
	items, err := rawListItems(body)
	if err != nil {
		return err
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

// rawListItems returns the raw items of an EventList body; they alias body.
func rawListItems(body []byte) ([][]byte, error) {
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
	batches []AcceptedBatch
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
func (q *byteQueue) put(b AcceptedBatch) error {
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
func (q *byteQueue) peek() (AcceptedBatch, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.batches) == 0 {
		return AcceptedBatch{}, false
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
	q.batches[0] = AcceptedBatch{}
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

// takeAll empties the queue and returns what it held.
func (q *byteQueue) takeAll() []AcceptedBatch {
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

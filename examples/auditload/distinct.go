package main

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"
)

// Distinct copies (--distinct): every pass over the input files is made into events a real cluster
// could have sent, none of them seen before: every namespace renamed (<namespace>-<run>-<pass>,
// in objectRef, requestURI and the bodies), every UUID (audit IDs, object UIDs, owner references)
// renamed the same way throughout the pass, and the audit timestamps set to the time of posting
// (requestReceivedTimestamp keeps the recorded latency before stageTimestamp). Posting the same
// batches again measures the webhook's repeat check instead of the pipeline, and the store and
// caches then hold one copy of every object instead of one per pass.

// pieceKind says what a piece of an event's template becomes in a copy.
type pieceKind uint8

const (
	pieceLiteral   pieceKind = iota // copied as it is
	pieceUUID                       // a UUID, renamed per pass
	pieceNamespace                  // a namespace's name, renamed per pass
	pieceReceived                   // the value of requestReceivedTimestamp: the copy's time minus the recorded latency
	pieceStage                      // the value of stageTimestamp: the copy's time
)

type piece struct {
	kind    pieceKind
	text    []byte        // the literal bytes, or the recorded UUID or namespace
	latency time.Duration // pieceReceived: stageTimestamp - requestReceivedTimestamp as recorded
}

// eventTemplate is one recorded audit event cut at the values a copy renames.
type eventTemplate []piece

// microTime is the format of the audit timestamps (metav1.MicroTime).
const microTime = "2006-01-02T15:04:05.000000Z07:00"

// span is a range of a recorded event to replace.
type span struct {
	start, end int
	kind       pieceKind
}

// newTemplate cuts one recorded audit event (a JSON object) into a template.
func newTemplate(ev []byte) (eventTemplate, error) {
	var head struct {
		Received string `json:"requestReceivedTimestamp"`
		Stage    string `json:"stageTimestamp"`
	}
	if err := json.Unmarshal(ev, &head); err != nil {
		return nil, fmt.Errorf("audit event: %w", err)
	}
	var spans []span
	var latency time.Duration
	if head.Stage != "" {
		stage, err1 := time.Parse(time.RFC3339Nano, head.Stage)
		received, err2 := time.Parse(time.RFC3339Nano, head.Received)
		if err1 == nil && err2 == nil && stage.After(received) {
			latency = stage.Sub(received)
		}
		for _, f := range []struct {
			key, value string
			kind       pieceKind
		}{{"requestReceivedTimestamp", head.Received, pieceReceived}, {"stageTimestamp", head.Stage, pieceStage}} {
			if f.value == "" {
				continue
			}
			needle := []byte(`"` + f.key + `":"` + f.value + `"`)
			if i := bytes.Index(ev, needle); i >= 0 {
				start := i + len(f.key) + 4
				spans = append(spans, span{start, start + len(f.value), f.kind})
			}
		}
	}
	spans = appendValueSpans(spans, ev, []byte(`"namespace":"`), pieceNamespace)
	spans = appendValueSpans(spans, ev, []byte(`/namespaces/`), pieceNamespace)
	for i := 0; i+36 <= len(ev); i++ {
		if isUUID(ev[i:i+36]) && (i == 0 || !isHex(ev[i-1])) && (i+36 == len(ev) || !isHex(ev[i+36])) {
			spans = append(spans, span{i, i + 36, pieceUUID})
			i += 35
		}
	}
	sort.Slice(spans, func(a, b int) bool { return spans[a].start < spans[b].start })
	var t eventTemplate
	at := 0
	for _, s := range spans {
		if s.start < at { // overlapping (a UUID inside a timestamp cannot be; skip to be safe)
			continue
		}
		if s.start > at {
			t = append(t, piece{kind: pieceLiteral, text: ev[at:s.start]})
		}
		p := piece{kind: s.kind, text: ev[s.start:s.end]}
		if s.kind == pieceReceived {
			p.latency = latency
		}
		t = append(t, p)
		at = s.end
	}
	if at < len(ev) {
		t = append(t, piece{kind: pieceLiteral, text: ev[at:]})
	}
	return t, nil
}

// appendValueSpans appends the spans of the values following every occurrence of prefix: a
// namespace's name, up to a quote, a slash, a question mark or a backslash (an escape).
func appendValueSpans(spans []span, ev, prefix []byte, kind pieceKind) []span {
	for off := 0; ; {
		i := bytes.Index(ev[off:], prefix)
		if i < 0 {
			return spans
		}
		start := off + i + len(prefix)
		end := start
		for end < len(ev) && ev[end] != '"' && ev[end] != '/' && ev[end] != '?' && ev[end] != '\\' {
			end++
		}
		if end > start {
			spans = append(spans, span{start, end, kind})
		}
		off = end
	}
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }

// isUUID reports whether b is a lowercase UUID (8-4-4-4-12 hex digits).
func isUUID(b []byte) bool {
	for i, c := range b {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !isHex(c) {
				return false
			}
		}
	}
	return true
}

// distinctSource makes batches of distinct copies of recorded events, pass after pass.
type distinctSource struct {
	events []eventTemplate
	run    string // names this run: the passes of two runs do not collide
	seed   uint64
	next   int // the next event of the pass
	pass   int
	mask   uint64 // the pass's UUID mask (48 bits)
	suffix []byte // the pass's namespace suffix
	buf    []byte
}

// newDistinctSource reads the events of batches (EventLists) into templates.
func newDistinctSource(batches []batch) (*distinctSource, error) {
	s := &distinctSource{}
	for _, b := range batches {
		var list struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(b.body, &list); err != nil {
			return nil, fmt.Errorf("batch: %w", err)
		}
		for _, item := range list.Items {
			t, err := newTemplate(item)
			if err != nil {
				return nil, err
			}
			s.events = append(s.events, t)
		}
	}
	if len(s.events) == 0 {
		return nil, fmt.Errorf("no audit events to copy")
	}
	var seed [8]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	s.seed = binary.LittleEndian.Uint64(seed[:])
	s.run = hex.EncodeToString(seed[:2])
	s.startPass(0)
	return s, nil
}

// splitmix64 is a 64-bit mixing function (SplitMix64's finalizer).
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func (s *distinctSource) startPass(pass int) {
	s.pass, s.next = pass, 0
	s.mask = splitmix64(s.seed+uint64(pass)) & (1<<48 - 1)
	if s.mask == 0 {
		s.mask = 1
	}
	s.suffix = []byte("-" + s.run + "-" + strconv.Itoa(pass))
}

// appendEvent appends the copy of template t of the current pass, dated at.
func (s *distinctSource) appendEvent(dst []byte, t eventTemplate, at time.Time) []byte {
	for _, p := range t {
		switch p.kind {
		case pieceLiteral:
			dst = append(dst, p.text...)
		case pieceUUID:
			// The last 12 hex digits XOR the pass's mask: one-to-one within a pass, so owner
			// references still name their owners' new UIDs.
			var node [8]byte
			_, _ = hex.Decode(node[2:], p.text[24:36])
			v := binary.BigEndian.Uint64(node[:]) ^ s.mask
			binary.BigEndian.PutUint64(node[:], v)
			dst = append(dst, p.text[:24]...)
			dst = hex.AppendEncode(dst, node[2:])
		case pieceNamespace:
			dst = append(dst, p.text...)
			dst = append(dst, s.suffix...)
		case pieceReceived:
			dst = at.Add(-p.latency).UTC().AppendFormat(dst, microTime)
		case pieceStage:
			dst = at.UTC().AppendFormat(dst, microTime)
		}
	}
	return dst
}

// nextBatch returns an EventList of the next n copies (passes continue where the last batch
// stopped), dated so that the last is at and each is step after the one before it.
func (s *distinctSource) nextBatch(n int, at time.Time, step time.Duration) batch {
	buf := append(s.buf[:0], `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[`...)
	for i := range n {
		if s.next == len(s.events) {
			s.startPass(s.pass + 1)
		}
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = s.appendEvent(buf, s.events[s.next], at.Add(-time.Duration(n-1-i)*step))
		s.next++
	}
	buf = append(buf, "]}"...)
	s.buf = buf
	// The body is posted by another goroutine, and may be posted again after a 429.
	return batch{body: bytes.Clone(buf), events: n}
}

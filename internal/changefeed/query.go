package changefeed

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Query selects changes. Empty fields match anything; the object fields match exactly.
type Query struct {
	Cluster, Namespace, Group, Resource, Name string
	// User matches the user or the impersonator exactly.
	User string
	// UserKinds are KindPerson, KindController or KindNode.
	UserKinds []string
	// Verbs are write verbs.
	Verbs []string
	// Outcome is "ok" (codes below 300), "failed" (300 and above) or "" (both).
	Outcome string
	// From and To bound the changes' times (To excluded); a zero To means no bound.
	From, To time.Time
	// Limit bounds the changes returned (0: DefaultLimit, at most MaxLimit).
	Limit int
	// Before continues a listing: only changes before this position (Page.Next).
	Before Cursor
	// MaxScan bounds the index entries a store reads for one page (0: DefaultMaxScan); a page
	// cut by it says so (Page.ScanCut) and gives the position to go on from.
	MaxScan int
}

// Limits of a Query.
const (
	DefaultLimit   = 100
	MaxLimit       = 5000
	DefaultMaxScan = 200_000
)

// Outcomes of Query.Outcome.
const (
	OutcomeOK     = "ok"
	OutcomeFailed = "failed"
)

// Validate reports what is wrong with q.
func (q Query) Validate() error {
	var errs []error
	for _, k := range q.UserKinds {
		if k != KindPerson && k != KindController && k != KindNode {
			errs = append(errs, fmt.Errorf("userKind %q: want person, controller or node", k))
		}
	}
	for _, v := range q.Verbs {
		if !IsWriteVerb(v) {
			errs = append(errs, fmt.Errorf("verb %q: want create, update, patch, delete or deletecollection", v))
		}
	}
	if q.Outcome != "" && q.Outcome != OutcomeOK && q.Outcome != OutcomeFailed {
		errs = append(errs, fmt.Errorf("outcome %q: want ok or failed", q.Outcome))
	}
	if q.Limit < 0 || q.Limit > MaxLimit {
		errs = append(errs, fmt.Errorf("limit %d: want 1 to %d", q.Limit, MaxLimit))
	}
	if !q.To.IsZero() && q.To.Before(q.From) {
		errs = append(errs, errors.New("until is before since"))
	}
	return errors.Join(errs...)
}

// WithDefaults returns q with its zero limits set.
func (q Query) WithDefaults() Query {
	if q.Limit == 0 {
		q.Limit = DefaultLimit
	}
	if q.MaxScan == 0 {
		q.MaxScan = DefaultMaxScan
	}
	return q
}

// Match reports whether c is one of the changes q selects (its time range and cursor aside).
func (q *Query) Match(c *Change) bool {
	o := &c.Object
	switch {
	case q.Cluster != "" && o.Cluster != q.Cluster,
		q.Namespace != "" && o.Namespace != q.Namespace,
		q.Group != "" && o.Group != q.Group,
		q.Resource != "" && o.Resource != q.Resource,
		q.Name != "" && o.Name != q.Name,
		q.User != "" && c.User != q.User && c.Impersonator != q.User,
		len(q.Verbs) > 0 && !slices.Contains(q.Verbs, c.Verb),
		q.Outcome == OutcomeOK && c.Failed(),
		q.Outcome == OutcomeFailed && !c.Failed(),
		len(q.UserKinds) > 0 && !slices.Contains(q.UserKinds, c.UserKind()):
		return false
	}
	return true
}

// Page is one answer to a Query: changes newest first.
type Page struct {
	Changes []Change
	// Next is where the next page starts (Query.Before) when more changes may match: the page
	// is full, or the store stopped scanning (ScanCut). Zero when the range is exhausted.
	Next Cursor
	// ScanCut says the store read Query.MaxScan index entries before filling the page.
	ScanCut bool
	// Scanned counts the index entries read.
	Scanned int
}

// Cursor is a position in the feed: the changes before it (older, or as old with a smaller span
// ID) come after it in a listing.
type Cursor struct {
	Time   time.Time
	SpanID trace.SpanID
}

// IsZero reports whether c is no position (the start of a listing).
func (c Cursor) IsZero() bool { return c.Time.IsZero() && !c.SpanID.IsValid() }

// Before reports whether the change at (t, sid) comes after the cursor in a listing.
func (c Cursor) Before(t time.Time, sid trace.SpanID) bool {
	if c.IsZero() {
		return true
	}
	if !t.Equal(c.Time) {
		return t.Before(c.Time)
	}
	return string(sid[:]) < string(c.SpanID[:])
}

// String encodes the cursor for a URL.
func (c Cursor) String() string {
	if c.IsZero() {
		return ""
	}
	b := binary.BigEndian.AppendUint64(nil, uint64(c.Time.UnixNano()))
	b = append(b, c.SpanID[:]...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// ParseCursor reads Cursor.String.
func ParseCursor(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 8+len(trace.SpanID{}) {
		return Cursor{}, fmt.Errorf("cursor %q: not a cursor this API gave", s)
	}
	c := Cursor{Time: time.Unix(0, int64(binary.BigEndian.Uint64(b))).UTC()}
	copy(c.SpanID[:], b[8:])
	return c, nil
}

// CursorOf is the position of c.
func CursorOf(c *Change) Cursor { return Cursor{Time: c.Time, SpanID: c.SpanID} }

// Sort orders changes newest first (ties by span ID, larger first), the order of a Page.
func Sort(cs []Change) {
	slices.SortFunc(cs, func(a, b Change) int {
		if c := b.Time.Compare(a.Time); c != 0 {
			return c
		}
		return compareSpanID(b.SpanID, a.SpanID)
	})
}

func compareSpanID(a, b trace.SpanID) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// Source is a store with a change feed.
type Source interface {
	ChangeFeed() *Feed
}

// ErrSkip is what an entry's decode function of Collect returns for an entry that it found,
// cheaply, does not match the query (see DecodeMatching).
var ErrSkip = errors.New("the change does not match")

// Collect builds the Page of q (with defaults) from index entries read newest first: next
// returns the next entry's position and a function that decodes it, ok false at the end of the
// range. Entries at or after q.Before, or outside [q.From, q.To), are skipped; so are matching
// changes keep (when not nil) refuses, e.g. those whose trace retention deleted.
func Collect(q Query, next func() (t time.Time, sid trace.SpanID, decode func() (Change, error), ok bool, err error), keep func(*Change) (bool, error)) (Page, error) {
	q = q.WithDefaults()
	var p Page
	var last Cursor // the position of the last entry read
	for {
		t, sid, decode, ok, err := next()
		if err != nil {
			return p, err
		}
		if !ok || t.Before(q.From) {
			return p, nil // the range is exhausted: no Next
		}
		if (!q.To.IsZero() && !t.Before(q.To)) || !q.Before.Before(t, sid) {
			continue
		}
		if p.Scanned >= q.MaxScan {
			p.ScanCut, p.Next = true, last
			return p, nil
		}
		p.Scanned++
		last = Cursor{Time: t, SpanID: sid}
		c, err := decode()
		if errors.Is(err, ErrSkip) {
			continue
		}
		if err != nil {
			return p, err
		}
		if !q.Match(&c) {
			continue
		}
		if keep != nil {
			if ok, err := keep(&c); err != nil || !ok {
				if err != nil {
					return p, err
				}
				continue
			}
		}
		if len(p.Changes) == q.Limit {
			p.Next = CursorOf(&p.Changes[len(p.Changes)-1]) // one more matches
			return p, nil
		}
		p.Changes = append(p.Changes, c)
	}
}

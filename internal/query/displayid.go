package query

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
)

// displayMode says how a result is drawn. The values are the display digit of a displayID.
type displayMode uint8

// Display modes.
const (
	DisplayTree     displayMode = 0 // events as child spans with all their attributes
	displayTimeline displayMode = 1 // every event directly under the root
	displayTracing  displayMode = 2 // one span per object, events folded into its logs (default)
	displayGrouped  displayMode = 3 // like tracing, each source's events in a child span
)

var displayNames = [...]string{DisplayTree: "tree", displayTimeline: "timeline", displayTracing: "tracing", displayGrouped: "grouped"}

var linkNames = map[linkMode]string{LinkFullTree: "full tree", linkAncestors: "ancestors", linkDescendants: "descendants"}

// Valid reports whether d is a known display mode.
func (d displayMode) Valid() bool { return int(d) < len(displayNames) }

// Mode is a display mode combined with a link mode. Its name is the Jaeger service name.
type Mode struct {
	Display displayMode
	Link    linkMode
}

// DefaultMode is tracing without link following.
var DefaultMode = Mode{Display: displayTracing}

// Name is "tracing", "tracing [ancestors]", ...
func (m Mode) Name() string {
	if m.Link == linkNone {
		return displayNames[m.Display]
	}
	return displayNames[m.Display] + " [" + linkNames[m.Link] + "]"
}

// Modes lists every mode: the default first, then by display mode and link mode.
func Modes() []Mode {
	out := []Mode{DefaultMode}
	for _, d := range []displayMode{displayTracing, displayGrouped, DisplayTree, displayTimeline} {
		for _, l := range []linkMode{linkNone, LinkFullTree, linkAncestors, linkDescendants} {
			if m := (Mode{Display: d, Link: l}); m != DefaultMode {
				out = append(out, m)
			}
		}
	}
	return out
}

// ParseMode accepts a mode name as Modes names them; a leading "* " is ignored.
func ParseMode(name string) (Mode, error) {
	name = strings.TrimSpace(strings.TrimPrefix(name, "* "))
	if name == "" {
		return DefaultMode, nil
	}
	for _, m := range Modes() {
		if m.Name() == name {
			return m, nil
		}
	}
	return Mode{}, fmt.Errorf("unknown display mode %q", name)
}

// displayID is the stateless identity of a result, returned as the Jaeger trace ID. It names
// the mode, the time range and the anchor object, and resolves against the store alone, so it
// stays valid across restarts, needs no cache, and resolves on any backend (no index or prefix
// scan: the anchor's trace IDs are computed).
//
// Layout, as 32 hex digits (16 bytes):
//
//	ff M L SSSSSSSS DDDDDD HHHHHHHHHHHHHH
//	digits 0-1    "ff", marks a display ID
//	digit  2      display mode: 0 tree, 1 timeline, 2 tracing, 3 grouped
//	digit  3      link mode: 0 none, 1 full tree, 2 ancestors, 4 descendants
//	digits 4-11   range start, Unix seconds
//	digits 12-17  range length in seconds (at most 2^24-1, about 194 days)
//	digits 18-31  the anchor object's hash (aggregator.ObjectHash), the result's first found
//	              object: its traces in the range are aggregator.TraceIDForHash of each window
//
// The range is widened to whole seconds. Editing digits 2-3 switches the view of the same
// object and range.
//
// Earlier releases wrote digits 4-9 as zero, the range start in digits 10-17, its length in
// 18-23 and the first 4 bytes of the anchor's stored trace ID in 24-31; those IDs still parse
// (Legacy) and resolve on stores that find traces by ID prefix (the embedded and memory stores).
// newDisplayID writes that layout too for an anchor stored by an earlier release, whose trace ID
// does not name its object.
type displayID struct {
	Mode       Mode
	Start, End time.Time
	// Object is the hash of the anchor object.
	Object aggregator.ObjectHash
	// Legacy is set for the earlier layout; LegacyAnchor then holds the first bytes of the
	// anchor's trace ID, and Object is unset.
	Legacy       bool
	LegacyAnchor [4]byte
}

const maxRangeSeconds = 1<<24 - 1

// newDisplayID builds the ID of a result anchored at the object key, whose first window in the
// range is stored as the trace anchor.
func newDisplayID(mode Mode, from, to time.Time, key aggregator.ObjectKey, anchor trace.TraceID) displayID {
	start := from.Unix()
	end := to.Unix()
	if to.Nanosecond() != 0 {
		end++
	}
	if end < start {
		end = start
	}
	if end-start > maxRangeSeconds {
		start = end - maxRangeSeconds
	}
	start = max(start, 0)
	id := displayID{Mode: mode, Start: time.Unix(start, 0).UTC(), End: time.Unix(end, 0).UTC(), Object: aggregator.HashObject(key)}
	if _, _, ok := aggregator.ParseTraceID(anchor); anchor.IsValid() && !ok {
		id.Legacy, id.Object = true, aggregator.ObjectHash{}
		copy(id.LegacyAnchor[:], anchor[:4])
	}
	return id
}

// TraceID encodes the ID.
func (d displayID) TraceID() trace.TraceID {
	var b trace.TraceID
	b[0] = 0xff
	b[1] = byte(d.Mode.Display)<<4 | byte(d.Mode.Link)
	start := d.Start.Unix()
	n := uint32(min(max(d.End.Unix()-start, 0), maxRangeSeconds))
	if d.Legacy {
		binary.BigEndian.PutUint32(b[5:9], uint32(start))
		b[9], b[10], b[11] = byte(n>>16), byte(n>>8), byte(n)
		copy(b[12:], d.LegacyAnchor[:])
		return b
	}
	binary.BigEndian.PutUint32(b[2:6], uint32(start))
	b[6], b[7], b[8] = byte(n>>16), byte(n>>8), byte(n)
	copy(b[9:], d.Object[:])
	return b
}

// String is the 32 hex digits.
func (d displayID) String() string { return d.TraceID().String() }

// errNotDisplayID is returned by parseDisplayID for an ID without the marker.
var errNotDisplayID = errors.New("not a display ID")

// parseDisplayID decodes an ID made by displayID.TraceID. An ID whose digits 4-9 are zero has
// the earlier layout (a range starting within 256 seconds of 1970 cannot be told from it).
func parseDisplayID(id trace.TraceID) (displayID, error) {
	if id[0] != 0xff {
		return displayID{}, errNotDisplayID
	}
	m := Mode{Display: displayMode(id[1] >> 4), Link: linkMode(id[1] & 0x0f)}
	if !m.Display.Valid() {
		return displayID{}, fmt.Errorf("trace ID %s: unknown display mode digit %d", id, m.Display)
	}
	if !m.Link.Valid() {
		return displayID{}, fmt.Errorf("trace ID %s: unknown link mode digit %d", id, m.Link)
	}
	if id[2] == 0 && id[3] == 0 && id[4] == 0 {
		start := int64(binary.BigEndian.Uint32(id[5:9]))
		n := int64(id[9])<<16 | int64(id[10])<<8 | int64(id[11])
		d := displayID{Mode: m, Start: time.Unix(start, 0).UTC(), End: time.Unix(start+n, 0).UTC(), Legacy: true}
		copy(d.LegacyAnchor[:], id[12:])
		return d, nil
	}
	start := int64(binary.BigEndian.Uint32(id[2:6]))
	n := int64(id[6])<<16 | int64(id[7])<<8 | int64(id[8])
	d := displayID{Mode: m, Start: time.Unix(start, 0).UTC(), End: time.Unix(start+n, 0).UTC()}
	copy(d.Object[:], id[9:])
	return d, nil
}

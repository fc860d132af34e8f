package frontend

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// DisplayMode says how a result is drawn. The values are the display digit of a DisplayID.
type DisplayMode uint8

// Display modes.
const (
	DisplayTree     DisplayMode = 0 // events as child spans with all their attributes
	DisplayTimeline DisplayMode = 1 // every event directly under the root
	DisplayTracing  DisplayMode = 2 // one span per object, events folded into its logs (default)
	DisplayGrouped  DisplayMode = 3 // like tracing, each source's events in a child span
)

var displayNames = [...]string{DisplayTree: "tree", DisplayTimeline: "timeline", DisplayTracing: "tracing", DisplayGrouped: "grouped"}

var linkNames = map[LinkMode]string{LinkFullTree: "full tree", LinkAncestors: "ancestors", LinkDescendants: "descendants"}

// Valid reports whether d is a known display mode.
func (d DisplayMode) Valid() bool { return int(d) < len(displayNames) }

// Mode is a display mode combined with a link mode. Its name is the Jaeger service name.
type Mode struct {
	Display DisplayMode
	Link    LinkMode
}

// DefaultMode is tracing without link following.
var DefaultMode = Mode{Display: DisplayTracing}

// Name is "tracing", "tracing [ancestors]", ...
func (m Mode) Name() string {
	if m.Link == LinkNone {
		return displayNames[m.Display]
	}
	return displayNames[m.Display] + " [" + linkNames[m.Link] + "]"
}

// Modes lists every mode: the default first, then by display mode and link mode.
func Modes() []Mode {
	out := []Mode{DefaultMode}
	for _, d := range []DisplayMode{DisplayTracing, DisplayGrouped, DisplayTree, DisplayTimeline} {
		for _, l := range []LinkMode{LinkNone, LinkFullTree, LinkAncestors, LinkDescendants} {
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

// DisplayID is the stateless identity of a result, returned as the Jaeger trace ID. It names
// the mode, the time range and the anchor object, and resolves against the store alone, so it
// stays valid across restarts and needs no cache.
//
// Layout, as 32 hex digits (16 bytes):
//
//	ff M L 000000 SSSSSSSS DDDDDD AAAAAAAA
//	digits 0-1    "ff", marks a display ID
//	digit  2      display mode: 0 tree, 1 timeline, 2 tracing, 3 grouped
//	digit  3      link mode: 0 none, 1 full tree, 2 ancestors, 4 descendants
//	digits 4-9    reserved, written as zero and ignored when read (digits 2-9 are the
//	              predecessor's 8-digit mode field, e.g. 21000000 = tracing + full tree)
//	digits 10-17  range start, Unix seconds
//	digits 18-23  range length in seconds (at most 2^24-1, about 194 days)
//	digits 24-31  the first 4 bytes of the stored trace ID of the anchor: the first window
//	              of the result's first found object within the range
//
// The range is widened to whole seconds. Editing digits 2-3 switches the view of the same
// object and range. Resolving looks up stored traces by the anchor prefix among windows that
// overlap the range (store.Reader.FindTraces).
type DisplayID struct {
	Mode       Mode
	Start, End time.Time
	Anchor     [4]byte
}

const maxRangeSeconds = 1<<24 - 1

// NewDisplayID builds the ID of a result anchored at the stored trace anchor.
func NewDisplayID(mode Mode, from, to time.Time, anchor trace.TraceID) DisplayID {
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
	id := DisplayID{Mode: mode, Start: time.Unix(start, 0).UTC(), End: time.Unix(end, 0).UTC()}
	copy(id.Anchor[:], anchor[:4])
	return id
}

// TraceID encodes the ID.
func (d DisplayID) TraceID() trace.TraceID {
	var b trace.TraceID
	b[0] = 0xff
	b[1] = byte(d.Mode.Display)<<4 | byte(d.Mode.Link)
	start := d.Start.Unix()
	binary.BigEndian.PutUint32(b[5:9], uint32(start))
	n := uint32(min(max(d.End.Unix()-start, 0), maxRangeSeconds))
	b[9], b[10], b[11] = byte(n>>16), byte(n>>8), byte(n)
	copy(b[12:], d.Anchor[:])
	return b
}

// String is the 32 hex digits.
func (d DisplayID) String() string { return d.TraceID().String() }

// errNotDisplayID is returned by ParseDisplayID for an ID without the marker.
var errNotDisplayID = errors.New("not a display ID")

// ParseDisplayID decodes an ID made by DisplayID.TraceID.
func ParseDisplayID(id trace.TraceID) (DisplayID, error) {
	if id[0] != 0xff {
		return DisplayID{}, errNotDisplayID
	}
	m := Mode{Display: DisplayMode(id[1] >> 4), Link: LinkMode(id[1] & 0x0f)}
	if !m.Display.Valid() {
		return DisplayID{}, fmt.Errorf("trace ID %s: unknown display mode digit %d", id, m.Display)
	}
	if !m.Link.Valid() {
		return DisplayID{}, fmt.Errorf("trace ID %s: unknown link mode digit %d", id, m.Link)
	}
	start := int64(binary.BigEndian.Uint32(id[5:9]))
	n := int64(id[9])<<16 | int64(id[10])<<8 | int64(id[11])
	d := DisplayID{Mode: m, Start: time.Unix(start, 0).UTC(), End: time.Unix(start+n, 0).UTC()}
	copy(d.Anchor[:], id[12:])
	return d, nil
}

package auditv1

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/kelemetry/kelemetry/internal/jsonscan"
	"github.com/kelemetry/kelemetry/internal/objdiff"
)

// Kinds and API version of the audit.k8s.io/v1 objects this package decodes.
const (
	eventKind       = "Event"
	eventListKind   = "EventList"
	auditAPIVersion = "audit.k8s.io/v1"
)

// DecodeEvent decodes one audit.k8s.io/v1 Event JSON object, such as one line of a file written by
// kube-apiserver's --audit-log-path with --audit-log-format=json. If the object has a kind or an
// apiVersion, they must be Event and audit.k8s.io/v1.
//
// Only the fields of Event are decoded; the rest of the input is checked for JSON syntax and
// skipped. Unknown members are ignored, a repeated member replaces the earlier one (last wins),
// null leaves a field at its zero value (a null body is nil), member names are case-sensitive (as
// in Kubernetes), and a JSON value of the wrong type for a known field is an error that names the
// field. Strings may hold invalid UTF-8, which becomes U+FFFD as with encoding/json. Timestamps
// are RFC 3339 with any fraction of a second (kube-apiserver writes microseconds). Whatever this
// accepts, encoding/json accepts too and decodes to the same fields (a fuzz test checks this).
//
// The RequestObject and ResponseObject of the returned event alias data (no copy is made, which
// keeps decoding fast): the caller must neither modify nor reuse data while the event is in use.
// Strings are copies and never alias data.
func DecodeEvent(data []byte) (*Event, error) {
	d := getDecoder(data)
	defer putDecoder(d)
	ev, err := d.decodeTopEvent()
	if err != nil {
		return nil, fmt.Errorf("decode audit event: %w", err)
	}
	return ev, nil
}

// DecodeEventList decodes an audit.k8s.io/v1 EventList, the body kube-apiserver's audit webhook
// backend posts. The list's kind and apiVersion must be EventList and audit.k8s.io/v1; an item's
// kind and apiVersion, if present, must be Event and audit.k8s.io/v1. A null item is an error.
//
// Events are decoded as by DecodeEvent and alias data in the same way: the caller must neither
// modify nor reuse data while the events are in use. Errors name the item index and the field,
// such as "items[3].user.groups[1]: want string, got number".
func DecodeEventList(data []byte) ([]*Event, error) {
	events, _, err := DecodeEventListSkipping(data, nil)
	return events, err
}

// decodeEventListSkipping is DecodeEventList that leaves out the items for which skip (when not
// nil) reports true, given their audit ID and stage as soon as both are read, and returns how
// many it left out. A skipped item is checked for JSON syntax and for its kind and apiVersion
// as far as they came before its audit ID and stage (kube-apiserver writes them first), not
// for the types of its other fields. An item whose audit ID or stage comes again after skip
// was asked (the last one wins) is decoded whole as usual.
func DecodeEventListSkipping(data []byte, skip func(auditID []byte, stage string) bool) ([]*Event, int, error) {
	d := getDecoder(data)
	defer putDecoder(d)
	d.skip = skip
	events, err := d.decodeTopList()
	if err != nil {
		return nil, 0, fmt.Errorf("decode audit event list: %w", err)
	}
	return events, d.skipped, nil
}

// decodeError is a decoding error at a path inside the document, such as items[3].user.groups[1].
type decodeError struct {
	path string
	err  error
}

func (e *decodeError) Error() string { return e.path + ": " + e.err.Error() }
func (e *decodeError) Unwrap() error { return e.err }

// atField prefixes the path of err with an object member name.
func atField(name string, err error) error {
	if err == nil {
		return nil
	}
	return atPath(name, err)
}

// atIndex prefixes the path of err with an array index.
func atIndex(i int, err error) error {
	if err == nil {
		return nil
	}
	return atPath("["+strconv.Itoa(i)+"]", err)
}

func atPath(prefix string, err error) error {
	var de *decodeError
	if errors.As(err, &de) {
		if len(de.path) > 0 && de.path[0] == '[' {
			return &decodeError{path: prefix + de.path, err: de.err}
		}
		return &decodeError{path: prefix + "." + de.path, err: de.err}
	}
	return &decodeError{path: prefix, err: err}
}

// syntaxError is malformed JSON at a byte offset of the input.
type syntaxError struct {
	offset int
	msg    string
	eof    bool
}

func (e *syntaxError) Error() string {
	return e.msg + " at offset " + strconv.Itoa(e.offset)
}

// Unwrap makes a truncated input match io.ErrUnexpectedEOF.
func (e *syntaxError) Unwrap() error {
	if e.eof {
		return io.ErrUnexpectedEOF
	}
	return nil
}

// eventBlock holds an event and the structs its pointers usually point to, so that one allocation
// serves the common event.
type eventBlock struct {
	ev     Event
	ref    ObjectReference
	status Status
	resp   respMeta
}

const (
	// blockChunk is how many event blocks a list decode allocates at once.
	blockChunk = 32
	// maxInterned bounds the intern table of a pooled decoder.
	maxInterned = 4096
	// maxInternLen is the longest string that is interned.
	maxInternLen = 128
	// maxSkipDepth bounds the nesting of a skipped or raw value. With the few levels above such a
	// value it stays within encoding/json's limit of 10000.
	maxSkipDepth = 10000 - 16
)

// eventDecoder decodes audit events straight from the caller's buffer: a small hand-written JSON
// scanner that reads only the fields of Event and checks, then skips, everything else.
type eventDecoder struct {
	data []byte
	pos  int

	scratch []byte // unquoted string values
	nameBuf []byte // unquoted member names
	stack   []byte // open containers of skipValue
	blocks  []eventBlock
	// arena collects the bytes of the event's unique strings (audit ID, URI, object name, ...) and
	// pending where they go, so that they take one allocation per event instead of one each.
	arena   []byte
	pending []pendingString
	// intern holds strings of low-cardinality fields (verbs, stages, users, resources, groups, ...)
	// so that repeated values share one allocation across the events of a batch and across calls.
	intern map[string]string
	// lists remembers, per list field, the last string array read (its JSON and the result):
	// the groups and source IPs of a sender's events repeat event after event.
	lists [numListFields]listCache
	// annots remembers the last annotation maps read (their JSON and the map): a sender's
	// events carry the same authorization annotations, event after event. The map is shared by
	// the events that carry it, which must not modify it (nothing modifies decoded events).
	annots    [numAnnotCache]mapCache
	annotNext int

	// rec, while readResponse reads a response body, records the body's Layout: every object
	// and array the decoder opens and closes, at offsets from recBase (the body's '{').
	rec     *objdiff.Layout
	recBase int
	lay     objdiff.Layout // behind rec, reused

	// skip, when set, is asked about each item of a list once its audit ID and stage are read:
	// true skips the rest of the item (checked for syntax only) and leaves it out of the result.
	skip    func(auditID []byte, stage string) bool
	skipped int
}

// errSkipped ends decodeEvent for an item that skip left out; errRedecode for one whose audit ID
// or stage was repeated after skip was asked, so that it must be decoded again without skip.
var (
	errSkipped  = errors.New("audit: item skipped")
	errRedecode = errors.New("audit: item decoded again")
)

// List fields of readStrings.
const (
	listSourceIPs = iota
	listGroups
	numListFields
)

// numAnnotCache is how many annotation maps a decoder remembers.
const numAnnotCache = 4

type mapCache struct {
	raw []byte // a copy: the cache outlives the data
	m   map[string]string
}

// maxCachedList bounds the JSON of a string array that listCache keeps.
const maxCachedList = 1 << 10

type listCache struct {
	raw  []byte // a copy: the cache outlives the data
	list []string
	ok   bool
}

var decoderPool = sync.Pool{New: func() any {
	return &eventDecoder{intern: make(map[string]string, 256)}
}}

func getDecoder(data []byte) *eventDecoder {
	d := decoderPool.Get().(*eventDecoder)
	d.data = data
	d.pos = 0
	return d
}

func putDecoder(d *eventDecoder) {
	// Drop every reference to the caller's data and events before pooling.
	d.data = nil
	d.blocks = nil
	d.skip = nil
	d.skipped = 0
	if cap(d.scratch) > 64<<10 {
		d.scratch = nil
	}
	if cap(d.nameBuf) > 64<<10 {
		d.nameBuf = nil
	}
	if cap(d.stack) > 4<<10 {
		d.stack = nil
	}
	d.rec = nil
	if d.lay.Bytes() > 64<<10 {
		d.lay = objdiff.Layout{}
	}
	if cap(d.arena) > 64<<10 {
		d.arena = nil
	}
	clear(d.pending[:cap(d.pending)]) // drop the pointers into events
	d.pending = d.pending[:0]
	if len(d.intern) >= maxInterned {
		clear(d.intern)
	}
	decoderPool.Put(d)
}

// pendingString is a string field of the event being decoded and its bytes in the arena.
type pendingString struct {
	dst        *string
	start, end int
}

// newBlock returns a zeroed event block, allocated in chunks when chunked is true.
func (d *eventDecoder) newBlock(chunked bool) *eventBlock {
	if !chunked {
		return new(eventBlock)
	}
	if len(d.blocks) == cap(d.blocks) {
		d.blocks = make([]eventBlock, 0, blockChunk)
	}
	d.blocks = d.blocks[:len(d.blocks)+1]
	return &d.blocks[len(d.blocks)-1]
}

func (d *eventDecoder) decodeTopEvent() (*Event, error) {
	if d.ws() != '{' {
		return nil, d.unexpected("object")
	}
	b := d.newBlock(false)
	if err := d.decodeEvent(b); err != nil {
		return nil, err
	}
	if err := d.finish(); err != nil {
		return nil, err
	}
	return &b.ev, nil
}

func (d *eventDecoder) decodeTopList() ([]*Event, error) {
	if null, err := d.beginObject(); null || err != nil {
		if err == nil {
			err = errors.New("want object, got null")
		}
		return nil, err
	}
	var kind, apiVersion string
	var events []*Event
	for first := true; ; first = false {
		name, more, err := d.nextMember(first)
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
		switch string(name) {
		case "kind":
			kind, err = d.readInterned()
		case "apiVersion":
			apiVersion, err = d.readInterned()
		case "items":
			events, err = d.decodeItems()
			if err != nil {
				return nil, atField("items", err)
			}
		default:
			err = d.skipValue()
		}
		if err != nil {
			return nil, atField(string(name), err)
		}
	}
	if err := d.finish(); err != nil {
		return nil, err
	}
	if err := checkType(kind, apiVersion, eventListKind, true); err != nil {
		return nil, err
	}
	return events, nil
}

// finish checks that nothing but whitespace follows the top-level value.
func (d *eventDecoder) finish() error {
	if d.ws() != 0 || d.pos < len(d.data) {
		return d.syntaxErr("after top-level value")
	}
	return nil
}

// checkType checks the kind and apiVersion of an object. When required is false, empty values pass.
func checkType(kind, apiVersion, wantKind string, required bool) error {
	if kind != wantKind && (required || kind != "") {
		return fmt.Errorf("wrong kind %q, want %s", kind, wantKind)
	}
	if apiVersion != auditAPIVersion && (required || apiVersion != "") {
		return fmt.Errorf("wrong apiVersion %q, want %s", apiVersion, auditAPIVersion)
	}
	return nil
}

func (d *eventDecoder) decodeItems() ([]*Event, error) {
	if null, err := d.beginArray(); null || err != nil {
		return nil, err
	}
	// An event takes about 3 KB on the wire: size the result for that, within limits.
	events := make([]*Event, 0, min(len(d.data)/2048+1, 4096))
	for i := 0; ; i++ {
		more, err := d.nextElement(i == 0)
		if err != nil {
			return nil, err
		}
		if !more {
			return events, nil
		}
		switch d.ws() {
		case '{':
			b := d.newBlock(true)
			start := d.pos
			err := d.decodeEvent(b)
			switch {
			case err == nil:
				events = append(events, &b.ev)
				continue
			case errors.Is(err, errSkipped):
				// The block serves the next item.
				*b = eventBlock{}
				d.blocks = d.blocks[:len(d.blocks)-1]
				d.skipped++
				continue
			case errors.Is(err, errRedecode):
				*b = eventBlock{}
				d.pos = start
				skip := d.skip
				d.skip = nil
				err = d.decodeEvent(b)
				d.skip = skip
				if err == nil {
					events = append(events, &b.ev)
					continue
				}
			}
			return nil, atIndex(i, err)
		case 'n':
			return nil, atIndex(i, errors.New("null event"))
		default:
			return nil, atIndex(i, d.unexpected("object"))
		}
	}
}

// decodeEvent decodes the event object that comes next (its '{' is the next byte) into b.ev.
func (d *eventDecoder) decodeEvent(b *eventBlock) error {
	d.pos++ // '{'
	d.arena = d.arena[:0]
	d.pending = d.pending[:0]
	ev := &b.ev
	asked := d.skip == nil
	idSlot := -1 // the audit ID's entry in d.pending
	for first := true; ; first = false {
		name, more, err := d.nextMember(first)
		if err != nil {
			return err
		}
		if !more {
			break
		}
		switch string(name) {
		case "kind":
			ev.Kind, err = d.readInterned()
		case "apiVersion":
			ev.APIVersion, err = d.readInterned()
		case "level":
			ev.Level, err = d.readInterned()
		case "auditID":
			err = d.readEventString(&ev.AuditID)
			idSlot = len(d.pending) - 1
		case "stage":
			ev.Stage, err = d.readInterned()
		case "requestURI":
			err = d.readEventString(&ev.RequestURI)
		case "verb":
			ev.Verb, err = d.readInterned()
		case "user":
			ev.User = UserInfo{}
			_, err = d.decodeUser(&ev.User) // null leaves the zero UserInfo
		case "impersonatedUser":
			u := new(UserInfo)
			var null bool
			null, err = d.decodeUser(u)
			ev.ImpersonatedUser = u
			if null {
				ev.ImpersonatedUser = nil
			}
		case "sourceIPs":
			ev.SourceIPs, err = d.readStrings(listSourceIPs)
		case "userAgent":
			ev.UserAgent, err = d.readInterned()
		case "objectRef":
			ref := &b.ref
			if ev.ObjectRef != nil { // repeated: never overwrite what was handed out
				ref = new(ObjectReference)
			}
			*ref = ObjectReference{}
			var null bool
			null, err = d.decodeObjectRef(ref)
			ev.ObjectRef = ref
			if null {
				ev.ObjectRef = nil
			}
		case "responseStatus":
			st := &b.status
			if ev.ResponseStatus != nil {
				st = new(Status)
			}
			*st = Status{}
			var null bool
			null, err = d.decodeStatus(st)
			ev.ResponseStatus = st
			if null {
				ev.ResponseStatus = nil
			}
		case "requestObject":
			ev.RequestObject, err = d.readRaw()
		case "responseObject":
			resp := &b.resp
			if ev.resp != nil { // repeated: never overwrite what was handed out
				resp = new(respMeta)
			}
			ev.ResponseObject, err = d.readResponse(resp)
			ev.resp = resp
		case "requestReceivedTimestamp":
			ev.RequestReceivedTimestamp, err = d.readTime()
		case "stageTimestamp":
			ev.StageTimestamp, err = d.readTime()
		case "annotations":
			ev.Annotations, err = d.readAnnotations()
		default:
			err = d.skipValue()
		}
		if err != nil {
			return atField(string(name), err)
		}
		if !asked && idSlot >= 0 && ev.Stage != "" {
			asked = true
			id := d.pending[idSlot]
			if d.skip(d.arena[id.start:id.end], ev.Stage) {
				if err := checkType(ev.Kind, ev.APIVersion, eventKind, false); err != nil {
					return err
				}
				return d.skipRest()
			}
		}
	}
	d.flushEventStrings()
	return checkType(ev.Kind, ev.APIVersion, eventKind, false)
}

// skipRest checks the syntax of the rest of the event being decoded and skips it: errSkipped, or
// errRedecode when its audit ID or stage comes again (the last one wins, so what skip was asked
// about may not be the event's identity).
func (d *eventDecoder) skipRest() error {
	for {
		name, more, err := d.nextMember(false)
		if err != nil {
			return err
		}
		if !more {
			return errSkipped
		}
		if n := string(name); n == "auditID" || n == "stage" || n == "kind" || n == "apiVersion" {
			return errRedecode
		}
		if err := d.skipValue(); err != nil {
			return atField(string(name), err)
		}
	}
}

func (d *eventDecoder) decodeUser(u *UserInfo) (null bool, err error) {
	if null, err := d.beginObject(); null || err != nil {
		return null, err
	}
	for first := true; ; first = false {
		name, more, err := d.nextMember(first)
		if err != nil || !more {
			return false, err
		}
		switch string(name) {
		case "username":
			u.Username, err = d.readInterned()
		case "uid":
			u.UID, err = d.readInterned()
		case "groups":
			u.Groups, err = d.readStrings(listGroups)
		default:
			err = d.skipValue()
		}
		if err != nil {
			return false, atField(string(name), err)
		}
	}
}

func (d *eventDecoder) decodeObjectRef(r *ObjectReference) (null bool, err error) {
	if null, err := d.beginObject(); null || err != nil {
		return null, err
	}
	for first := true; ; first = false {
		name, more, err := d.nextMember(first)
		if err != nil || !more {
			return false, err
		}
		switch string(name) {
		case "resource":
			r.Resource, err = d.readInterned()
		case "namespace":
			r.Namespace, err = d.readInterned()
		case "name":
			err = d.readEventString(&r.Name)
		case "uid":
			err = d.readEventString(&r.UID)
		case "apiGroup":
			r.APIGroup, err = d.readInterned()
		case "apiVersion":
			r.APIVersion, err = d.readInterned()
		case "resourceVersion":
			err = d.readEventString(&r.ResourceVersion)
		case "subresource":
			r.Subresource, err = d.readInterned()
		default:
			err = d.skipValue()
		}
		if err != nil {
			return false, atField(string(name), err)
		}
	}
}

func (d *eventDecoder) decodeStatus(s *Status) (null bool, err error) {
	if null, err := d.beginObject(); null || err != nil {
		return null, err
	}
	for first := true; ; first = false {
		name, more, err := d.nextMember(first)
		if err != nil || !more {
			return false, err
		}
		switch string(name) {
		case "status":
			s.Status, err = d.readInterned()
		case "message":
			err = d.readEventString(&s.Message)
		case "reason":
			s.Reason, err = d.readInterned()
		case "details":
			det := new(StatusDetails)
			var null bool
			null, err = d.decodeDetails(det)
			s.Details = det
			if null {
				s.Details = nil
			}
		case "code":
			s.Code, err = d.readInt32()
		default:
			err = d.skipValue()
		}
		if err != nil {
			return false, atField(string(name), err)
		}
	}
}

func (d *eventDecoder) decodeDetails(det *StatusDetails) (null bool, err error) {
	if null, err := d.beginObject(); null || err != nil {
		return null, err
	}
	for first := true; ; first = false {
		name, more, err := d.nextMember(first)
		if err != nil || !more {
			return false, err
		}
		switch string(name) {
		case "causes":
			det.Causes, err = d.decodeCauses()
		default:
			err = d.skipValue()
		}
		if err != nil {
			return false, atField(string(name), err)
		}
	}
}

func (d *eventDecoder) decodeCauses() ([]StatusCause, error) {
	if null, err := d.beginArray(); null || err != nil {
		return nil, err
	}
	causes := []StatusCause{}
	for i := 0; ; i++ {
		more, err := d.nextElement(i == 0)
		if err != nil {
			return nil, err
		}
		if !more {
			return causes, nil
		}
		var c StatusCause
		if err := d.decodeCause(&c); err != nil {
			return nil, atIndex(i, err)
		}
		causes = append(causes, c)
	}
}

// decodeCause decodes one cause; a null cause is the zero cause.
func (d *eventDecoder) decodeCause(c *StatusCause) error {
	if null, err := d.beginObject(); null || err != nil {
		return err
	}
	for first := true; ; first = false {
		name, more, err := d.nextMember(first)
		if err != nil || !more {
			return err
		}
		switch string(name) {
		case "reason":
			c.Type, err = d.readInterned()
		case "message":
			c.Message, err = d.readString()
		case "field":
			c.Field, err = d.readString()
		default:
			err = d.skipValue()
		}
		if err != nil {
			return atField(string(name), err)
		}
	}
}

// Scanning.

// ws skips whitespace and returns the next byte, or 0 at the end of the input.
func (d *eventDecoder) ws() byte {
	for d.pos < len(d.data) {
		if c := d.data[d.pos]; !jsonscan.IsSpace(c) {
			return c
		}
		d.pos++
	}
	return 0
}

// syntaxErr reports the byte at the current position as unexpected (or the end of the input).
func (d *eventDecoder) syntaxErr(context string) error {
	if d.pos >= len(d.data) {
		return &syntaxError{offset: d.pos, msg: "unexpected EOF", eof: true}
	}
	c := d.data[d.pos]
	var char string
	if c >= ' ' && c < utf8.RuneSelf {
		char = "'" + string(rune(c)) + "'"
	} else {
		char = fmt.Sprintf("byte 0x%02x", c)
	}
	return &syntaxError{offset: d.pos, msg: "invalid character " + char + " " + context}
}

// unexpected reports the value that comes next as not of the wanted type, or as invalid JSON.
func (d *eventDecoder) unexpected(want string) error {
	var got string
	switch c := d.ws(); c {
	case '{':
		got = "object"
	case '[':
		got = "array"
	case '"':
		got = "string"
	case 't', 'f':
		got = "boolean"
	case 'n':
		got = "null"
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		got = "number"
	default:
		return d.syntaxErr("at start of value")
	}
	return fmt.Errorf("want %s, got %s", want, got)
}

// beginObject reads the '{' of an object, or a null (then null is true).
func (d *eventDecoder) beginObject() (null bool, err error) {
	switch d.ws() {
	case '{':
		d.pos++
		return false, nil
	case 'n':
		return true, d.literal("null")
	default:
		return false, d.unexpected("object")
	}
}

// nextMember moves to the next member of the object being read and returns its name (valid until
// the next member), or more == false after the object's closing '}'. first is true for the first
// call on an object.
func (d *eventDecoder) nextMember(first bool) (name []byte, more bool, err error) {
	c := d.ws()
	if c == '}' {
		if d.rec != nil {
			d.rec.Close(d.pos - d.recBase)
		}
		d.pos++
		return nil, false, nil
	}
	if !first {
		if c != ',' {
			return nil, false, d.syntaxErr("after object member (want ',' or '}')")
		}
		d.pos++
		c = d.ws()
	}
	if c != '"' {
		return nil, false, d.syntaxErr("at start of object member name")
	}
	// Most names: plain ASCII, the ':' right after them.
	if j := jsonscan.PlainEnd(d.data, d.pos+1) + 1; j > 0 && j < len(d.data) && d.data[j] == ':' {
		name = d.data[d.pos+1 : j-1]
		d.pos = j + 1
		return name, true, nil
	}
	name, plain, err := d.scanString()
	if err != nil {
		return nil, false, err
	}
	if !plain {
		name = d.unquote(name, &d.nameBuf)
	}
	if d.ws() != ':' {
		return nil, false, d.syntaxErr("after object member name (want ':')")
	}
	d.pos++
	return name, true, nil
}

// beginArray reads the '[' of an array, or a null (then null is true).
func (d *eventDecoder) beginArray() (null bool, err error) {
	switch d.ws() {
	case '[':
		d.pos++
		return false, nil
	case 'n':
		return true, d.literal("null")
	default:
		return false, d.unexpected("array")
	}
}

// nextElement moves to the next element of the array being read, or returns more == false after
// the array's closing ']'. first is true for the first call on an array.
func (d *eventDecoder) nextElement(first bool) (more bool, err error) {
	c := d.ws()
	if c == ']' {
		if d.rec != nil {
			d.rec.Close(d.pos - d.recBase)
		}
		d.pos++
		return false, nil
	}
	if !first {
		if c != ',' {
			return false, d.syntaxErr("after array element (want ',' or ']')")
		}
		d.pos++
	}
	return true, nil
}

// literal reads the literal lit (true, false or null) that must come next.
func (d *eventDecoder) literal(lit string) error {
	if len(d.data)-d.pos >= len(lit) && string(d.data[d.pos:d.pos+len(lit)]) == lit {
		d.pos += len(lit)
		return nil
	}
	for i := 0; i < len(lit) && d.pos < len(d.data) && d.data[d.pos] == lit[i]; i++ {
		d.pos++
	}
	return d.syntaxErr("in literal " + lit)
}

// scanString scans the JSON string that starts at the current position (a '"') and returns its
// bytes between the quotes. plain is false if they need unquoting: escapes or non-ASCII bytes.
func (d *eventDecoder) scanString() (content []byte, plain bool, err error) {
	start := d.pos + 1
	end, flags, fault := jsonscan.Scan(d.data, start)
	if fault != jsonscan.OK {
		return nil, false, d.stringFault(end, fault)
	}
	d.pos = end + 1
	return d.data[start:end], flags == 0, nil
}

// stringFault reports the fault jsonscan found in a string at offset at.
func (d *eventDecoder) stringFault(at int, fault jsonscan.Fault) error {
	d.pos = at
	switch fault {
	case jsonscan.Control:
		return d.syntaxErr("in string (control characters must be escaped)")
	case jsonscan.BadEscape:
		return d.syntaxErr("in string escape")
	case jsonscan.BadUnicode:
		return d.syntaxErr(`in \u escape`)
	default:
		return d.syntaxErr("in string")
	}
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// unquote returns the value of a string whose content (between the quotes, as scanned just before)
// has escapes or non-ASCII bytes. The result aliases content or *buf.
func (d *eventDecoder) unquote(content []byte, buf *[]byte) []byte {
	if bytes.IndexByte(content, '\\') < 0 && utf8.Valid(content) {
		return content
	}
	// The string is syntactically valid: AppendUnquote can only complain about invalid UTF-8 or
	// lone surrogates, which it replaces with U+FFFD as encoding/json does.
	end := d.pos // just after the closing quote
	quoted := d.data[end-len(content)-2 : end]
	*buf, _ = jsontext.AppendUnquote((*buf)[:0], quoted)
	return *buf
}

// scanNumber scans the JSON number at the current position.
func (d *eventDecoder) scanNumber() error {
	data := d.data
	i := d.pos
	if i < len(data) && data[i] == '-' {
		i++
	}
	switch {
	case i >= len(data):
		d.pos = i
		return d.syntaxErr("in number")
	case data[i] == '0':
		i++
	case isDigit(data[i]):
		for i++; i < len(data) && isDigit(data[i]); i++ {
		}
	default:
		d.pos = i
		return d.syntaxErr("in number")
	}
	if i < len(data) && data[i] == '.' {
		i++
		if i >= len(data) || !isDigit(data[i]) {
			d.pos = i
			return d.syntaxErr("in number fraction")
		}
		for i++; i < len(data) && isDigit(data[i]); i++ {
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= len(data) || !isDigit(data[i]) {
			d.pos = i
			return d.syntaxErr("in number exponent")
		}
		for i++; i < len(data) && isDigit(data[i]); i++ {
		}
	}
	d.pos = i
	return nil
}

// skipValue checks and skips the JSON value that comes next, of any type. This is the hot loop of
// decoding (request and response bodies are most of the input): it works on local copies of the
// buffer and position, and falls back to the general scanning functions only for errors, escapes
// and numbers. Whitespace is looked for only where a byte that could follow it was not found:
// kube-apiserver sends compact JSON, and testing each position for whitespace first cost about a
// sixth of the loop's instructions.
func (d *eventDecoder) skipValue() error {
	data := d.data
	i := d.pos
	rec := d.rec
	stack := d.stack[:0]
	defer func() { d.stack = stack[:0] }()
	for {
		// A value.
	value:
		if i >= len(data) {
			d.pos = i
			return d.syntaxErr("at start of value")
		}
		switch c := data[i]; c {
		case '"':
			if j := jsonscan.SafeEnd(data, i+1); j >= 0 {
				i = j + 1
				break
			}
			var err error
			if i, err = d.skipString(i); err != nil {
				return err
			}
		case '{', '[':
			open := i
			i++
			if i < len(data) && data[i] <= ' ' {
				i = jsonscan.SkipSpace(data, i)
			}
			if i < len(data) && data[i] == c+2 { // '{'+2 == '}', '['+2 == ']'
				i++
				break // too short for the Layout
			}
			if len(stack) >= maxSkipDepth {
				d.pos = i
				return &syntaxError{offset: i, msg: "JSON nested too deeply"}
			}
			stack = append(stack, c)
			if rec != nil {
				rec.Open(open - d.recBase)
			}
			if c == '[' {
				continue // to the first element
			}
			if i < len(data) && data[i] == '"' { // the name as most are: plain, the ':' right after it
				if j := jsonscan.SafeEnd(data, i+1) + 1; j > 0 && j < len(data) && data[j] == ':' {
					i = j + 1
					continue
				}
			}
			var err error
			if i, err = d.skipName(i); err != nil {
				return err
			}
			continue // to the first member's value
		case 't':
			if len(data)-i < 4 || string(data[i:i+4]) != "true" {
				d.pos = i
				return d.literal("true")
			}
			i += 4
		case 'f':
			if len(data)-i < 5 || string(data[i:i+5]) != "false" {
				d.pos = i
				return d.literal("false")
			}
			i += 5
		case 'n':
			if len(data)-i < 4 || string(data[i:i+4]) != "null" {
				d.pos = i
				return d.literal("null")
			}
			i += 4
		case ' ', '\t', '\n', '\r':
			i = jsonscan.SkipSpace(data, i+1)
			goto value
		default:
			d.pos = i
			if c != '-' && !isDigit(c) {
				return d.syntaxErr("at start of value")
			}
			if err := d.scanNumber(); err != nil {
				return err
			}
			i = d.pos
		}

		// After a value: close containers until a ',' leads to the next value.
		for {
			if len(stack) == 0 {
				d.pos = i
				return nil
			}
			top := stack[len(stack)-1]
			if i < len(data) {
				switch data[i] {
				case ',':
					i++
					if top == '{' {
						if i < len(data) && data[i] == '"' {
							if j := jsonscan.SafeEnd(data, i+1) + 1; j > 0 && j < len(data) && data[j] == ':' {
								i = j + 1
								break
							}
						}
						var err error
						if i, err = d.skipName(i); err != nil {
							return err
						}
					}
				case top + 2:
					if rec != nil {
						rec.Close(i - d.recBase)
					}
					i++
					stack = stack[:len(stack)-1]
					continue
				case ' ', '\t', '\n', '\r':
					i = jsonscan.SkipSpace(data, i+1)
					continue
				default:
					goto bad
				}
				break // to the next value
			}
		bad:
			d.pos = i
			if top == '{' {
				return d.syntaxErr("after object member (want ',' or '}')")
			}
			return d.syntaxErr("after array element (want ',' or ']')")
		}
	}
}

// skipName skips the object member name at i (after any whitespace) and the ':' after it, and
// returns the index after the ':'.
func (d *eventDecoder) skipName(i int) (int, error) {
	data := d.data
	i = jsonscan.SkipSpace(data, i)
	if i >= len(data) || data[i] != '"' {
		d.pos = i
		return 0, d.syntaxErr("at start of object member name")
	}
	i, err := d.skipString(i)
	if err != nil {
		return 0, err
	}
	i = jsonscan.SkipSpace(data, i)
	if i >= len(data) || data[i] != ':' {
		d.pos = i
		return 0, d.syntaxErr("after object member name (want ':')")
	}
	return i + 1, nil
}

// skipString checks and skips the string whose opening quote is at i and returns the index after
// its closing quote.
func (d *eventDecoder) skipString(i int) (int, error) {
	end, fault := jsonscan.Check(d.data, i+1)
	if fault != jsonscan.OK {
		return 0, d.stringFault(end, fault)
	}
	return end + 1, nil
}

// Typed reads.

// readStr reads a JSON string or null (as nil). The result is valid until the next read.
func (d *eventDecoder) readStr() ([]byte, error) {
	switch d.ws() {
	case '"':
		if j := jsonscan.PlainEnd(d.data, d.pos+1); j >= 0 {
			s := d.data[d.pos+1 : j]
			d.pos = j + 1
			return s, nil
		}
		s, plain, err := d.scanString()
		if err != nil {
			return nil, err
		}
		if !plain {
			s = d.unquote(s, &d.scratch)
		}
		return s, nil
	case 'n':
		return nil, d.literal("null")
	default:
		return nil, d.unexpected("string")
	}
}

// readString reads a JSON string or null (as "") into a new string.
func (d *eventDecoder) readString() (string, error) {
	b, err := d.readStr()
	return string(b), err
}

// readEventString reads a JSON string or null (as "") of a field of the event being decoded with
// mostly unique values. *dst is set when the event is complete (see flushEventStrings).
func (d *eventDecoder) readEventString(dst *string) error {
	b, err := d.readStr()
	if err != nil {
		return err
	}
	start := len(d.arena)
	d.arena = append(d.arena, b...)
	// Appended even when empty: applied in order, the last value of a repeated member wins.
	d.pending = append(d.pending, pendingString{dst: dst, start: start, end: len(d.arena)})
	return nil
}

// flushEventStrings sets the fields read by readEventString, as substrings of one string.
func (d *eventDecoder) flushEventStrings() {
	all := string(d.arena)
	for _, p := range d.pending {
		*p.dst = all[p.start:p.end]
	}
	d.arena = d.arena[:0]
	d.pending = d.pending[:0]
}

// readInterned reads a JSON string or null (as "") of a field with few distinct values.
func (d *eventDecoder) readInterned() (string, error) {
	b, err := d.readStr()
	if err != nil || len(b) == 0 {
		return "", err
	}
	return d.internBytes(b), nil
}

func (d *eventDecoder) internBytes(b []byte) string {
	if len(b) > maxInternLen {
		return string(b)
	}
	if s, ok := d.intern[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(d.intern) < maxInterned {
		d.intern[s] = s
	}
	return s
}

// readStrings reads an array of strings, or null. A null element becomes "". The strings are
// interned: the arrays decoded are groups and source IPs, which repeat, so that an array whose
// JSON is the one read last for the field (slot) gives the same list again, capped so that an
// append cannot reach the other holders (the lists are only read).
func (d *eventDecoder) readStrings(slot int) ([]string, error) {
	c := &d.lists[slot]
	if d.ws() == '[' {
		start := d.pos
		if err := d.skipValue(); err != nil {
			d.pos = start // the list reader reports the error as ever
			return d.readStringList()
		}
		raw := d.data[start:d.pos]
		if c.ok && bytes.Equal(raw, c.raw) {
			return c.list, nil
		}
		d.pos = start
		list, err := d.readStringList()
		if err != nil {
			return nil, err
		}
		list = list[:len(list):len(list)]
		if len(raw) <= maxCachedList {
			c.raw = append(c.raw[:0], raw...)
			c.list, c.ok = list, true
		}
		return list, nil
	}
	return d.readStringList()
}

func (d *eventDecoder) readStringList() ([]string, error) {
	if null, err := d.beginArray(); null || err != nil {
		return nil, err
	}
	list := make([]string, 0, 4)
	for i := 0; ; i++ {
		more, err := d.nextElement(i == 0)
		if err != nil {
			return nil, err
		}
		if !more {
			return list, nil
		}
		b, err := d.readStr()
		if err != nil {
			return nil, atIndex(i, err)
		}
		list = append(list, d.internBytes(b))
	}
}

// readStringMap reads an object of strings or null. A null value becomes "".
func (d *eventDecoder) readStringMap() (map[string]string, error) {
	if null, err := d.beginObject(); null || err != nil {
		return nil, err
	}
	m := make(map[string]string)
	for first := true; ; first = false {
		name, more, err := d.nextMember(first)
		if err != nil {
			return nil, err
		}
		if !more {
			return m, nil
		}
		key := d.internBytes(name)
		v, err := d.readStr()
		if err != nil {
			return nil, atField(key, err)
		}
		m[key] = d.internBytes(v)
	}
}

// readAnnotations is readStringMap that returns the map read before for the same JSON.
func (d *eventDecoder) readAnnotations() (map[string]string, error) {
	if d.ws() != '{' {
		return d.readStringMap()
	}
	start := d.pos
	if err := d.skipValue(); err != nil {
		d.pos = start // the map reader reports the error as ever
		return d.readStringMap()
	}
	raw := d.data[start:d.pos]
	for i := range d.annots {
		if c := &d.annots[i]; c.m != nil && bytes.Equal(raw, c.raw) {
			return c.m, nil
		}
	}
	d.pos = start
	m, err := d.readStringMap()
	if err != nil || len(raw) > maxCachedList {
		return m, err
	}
	c := &d.annots[d.annotNext]
	d.annotNext = (d.annotNext + 1) % numAnnotCache
	c.raw = append(c.raw[:0], raw...)
	c.m = m
	return m, nil
}

// readRaw checks and reads any JSON value and returns it as it is in the input, without a copy;
// null is nil.
func (d *eventDecoder) readRaw() ([]byte, error) {
	if d.ws() == 'n' {
		return nil, d.literal("null")
	}
	start := d.pos
	if err := d.skipValue(); err != nil {
		return nil, err
	}
	// Capped so that an append to the value cannot overwrite what follows it in data.
	return d.data[start:d.pos:d.pos], nil
}

// readTime reads a timestamp string, decoded as time.Time decodes it from JSON (RFC 3339, any
// fraction of a second), or null.
func (d *eventDecoder) readTime() (time.Time, error) {
	var t time.Time
	switch d.ws() {
	case '"':
		start := d.pos
		if _, _, err := d.scanString(); err != nil {
			return t, err
		}
		if t, ok := parseTimeZ(d.data[start:d.pos]); ok {
			return t, nil
		}
		if err := t.UnmarshalJSON(d.data[start:d.pos]); err != nil {
			return t, fmt.Errorf("bad timestamp: %w", err)
		}
		return t, nil
	case 'n':
		return t, d.literal("null")
	default:
		return t, d.unexpected("timestamp string")
	}
}

// parseTimeZ reads the timestamps kube-apiserver writes, a JSON string (quotes included) of the
// form "2006-01-02T15:04:05Z" with 1 to 9 digits of the second after a '.' or none, as
// time.Time.UnmarshalJSON does, in about a sixth of its instructions (it took 780 a timestamp,
// 6% of decoding). ok is false for anything else (another offset, an escape, a field out of
// range), which UnmarshalJSON then reads or rejects.
func parseTimeZ(b []byte) (t time.Time, ok bool) {
	// "YYYY-MM-DDTHH:MM:SS" and the quotes and the 'Z'.
	if len(b) < 22 || b[0] != '"' || b[len(b)-1] != '"' || b[len(b)-2] != 'Z' ||
		b[5] != '-' || b[8] != '-' || b[11] != 'T' || b[14] != ':' || b[17] != ':' {
		return t, false
	}
	year, ok1 := digits(b[1:5])
	month, ok2 := digits(b[6:8])
	day, ok3 := digits(b[9:11])
	hour, ok4 := digits(b[12:14])
	minute, ok5 := digits(b[15:17])
	sec, ok6 := digits(b[18:20])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || month < 1 || month > 12 || day < 1 ||
		day > daysIn(month, year) || hour > 23 || minute > 59 || sec > 59 {
		return t, false
	}
	nsec := 0
	if frac := b[20 : len(b)-2]; len(frac) > 0 {
		if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
			return t, false
		}
		n, ok := digits(frac[1:])
		if !ok {
			return t, false
		}
		for range 10 - len(frac) {
			n *= 10
		}
		nsec = n
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC), true
}

// digits reads b, decimal digits only.
func digits(b []byte) (n int, ok bool) {
	for _, c := range b {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// daysIn is the number of days of month (1-12) in year, of the proleptic Gregorian calendar.
func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	default:
		return 31
	}
}

// readInt32 reads an integer that fits int32, or null (as 0).
func (d *eventDecoder) readInt32() (int32, error) {
	switch c := d.ws(); {
	case c == '-' || isDigit(c):
		start := d.pos
		if err := d.scanNumber(); err != nil {
			return 0, err
		}
		n, ok := parseInt32(d.data[start:d.pos])
		if !ok {
			return 0, fmt.Errorf("number %s is not a 32-bit integer", d.data[start:d.pos])
		}
		return n, nil
	case c == 'n':
		return 0, d.literal("null")
	default:
		return 0, d.unexpected("integer")
	}
}

// parseInt32 parses a JSON number (already scanned) that must be an integer in int32's range.
func parseInt32(b []byte) (int32, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 10 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if !isDigit(c) {
			return 0, false // a fraction or an exponent
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	if n < -1<<31 || n > 1<<31-1 {
		return 0, false
	}
	return int32(n), true
}

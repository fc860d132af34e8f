package auditv1

import (
	"bytes"
	"errors"
	"hash/maphash"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/kelemetry/kelemetry/internal/objdiff"
	"github.com/kelemetry/kelemetry/kube"
)

// BodyMeta is the part of an object body the consumer reads.
type BodyMeta struct {
	APIVersion, Kind                       string
	Name, Namespace, UID, ResourceVersion  string
	SeenAPIVersion, SeenKind, SeenMetadata bool
	// deletionTimestamp, deletionGracePeriodSeconds and finalizers say whether the object is
	// being deleted and what it waits for.
	DeletionTimestamp string
	GracePeriod       int64
	Finalizers        []string
	// metaHash fingerprints metadata.labels, annotations and ownerReferences (non-zero once
	// metadata was read): the aggregator runs linkers again when it changes.
	MetaHash uint64
	// managedFields is where metadata.managedFields is in the body, for its snapshot; known once
	// metadata, an object, was read whole.
	ManagedFields      objdiff.ManagedFields
	ManagedFieldsKnown bool
}

// metaSeed seeds metaHash; fingerprints are compared within one process only.
var metaSeed = maphash.MakeSeed()

// decodeBodyMeta reads apiVersion, kind and metadata.{name,namespace,uid,resourceVersion} from a
// JSON object, skipping every other member without decoding it, and stops as soon as it has the
// three top-level members (kube-apiserver writes them first, so spec and status are not scanned).
// It scans the body in place with the audit decoder's scanner; the part it scanned must be valid
// UTF-8. A repeated member name is not an error: its last value counts.
func DecodeBodyMeta(body []byte) (BodyMeta, error) {
	d := getDecoder(body)
	defer putDecoder(d)
	var m BodyMeta
	if null, err := d.beginObject(); err != nil || null {
		if err == nil {
			err = errNotJSONObject
		}
		return m, err
	}
	if _, err := d.bodyMetaMembers(&m, 0); err != nil {
		return m, err
	}
	if !utf8.Valid(body[:d.pos]) {
		return BodyMeta{}, errNotUTF8
	}
	return m, nil
}

var (
	errNotJSONObject = errors.New("response object is not a JSON object")
	errNotUTF8       = errors.New("response object is not valid UTF-8")
)

// bodyMetaMembers reads the members of an object body whose '{' was read until it has apiVersion,
// kind and metadata (then closed is false), or to its closing '}' (closed is true). base is where
// the body starts in the decoder's data.
func (d *eventDecoder) bodyMetaMembers(m *BodyMeta, base int) (closed bool, err error) {
	for first := true; ; first = false {
		name, more, err := d.nextMember(first)
		if err != nil {
			return false, err
		}
		if !more {
			return true, nil
		}
		switch string(name) {
		case "apiVersion":
			m.APIVersion, err = d.metaString()
			m.SeenAPIVersion = true
		case "kind":
			m.Kind, err = d.metaString()
			m.SeenKind = true
		case "metadata":
			err = d.bodyMetadata(m, base)
			m.SeenMetadata = true
		default:
			err = d.skipValue()
		}
		if err != nil {
			return false, err
		}
		if m.SeenAPIVersion && m.SeenKind && m.SeenMetadata {
			return false, nil
		}
	}
}

// respMeta is what the decoder read of an event's responseObject while it decoded the event, so
// that the consumer does not scan the body again: decodeBodyMeta's result for body, and the
// body's Layout for the diff.
type respMeta struct {
	meta    BodyMeta
	body    []byte // the ResponseObject it describes
	metaEnd int    // how far decodeBodyMeta would have read (its UTF-8 check covers that)
	layout  *objdiff.Layout
}

// readResponse reads a responseObject like readRaw, and the bodyMeta and Layout of an object
// body into r (r.body is nil when it has none).
func (d *eventDecoder) readResponse(r *respMeta) ([]byte, error) {
	*r = respMeta{}
	if d.ws() != '{' {
		return d.readRaw()
	}
	start := d.pos
	d.lay.Reset()
	d.rec, d.recBase = &d.lay, start
	d.rec.Open(0)
	d.pos++
	closed, err := d.bodyMetaMembers(&r.meta, start)
	metaEnd := d.pos - start
	for first := false; err == nil && !closed; {
		var more bool
		if _, more, err = d.nextMember(first); err == nil && more {
			err = d.skipValue()
		}
		closed = !more
	}
	d.rec = nil
	if err != nil {
		// Read it again as readRaw does, for readRaw's error.
		*r = respMeta{}
		d.pos = start
		return d.readRaw()
	}
	r.body = d.data[start:d.pos:d.pos]
	r.metaEnd = metaEnd
	if d.lay.Finish(len(r.body)) {
		r.layout = d.lay.Clone()
	}
	return r.body, nil
}

// respFor is what the decoder read of ev.ResponseObject, if ev.ResponseObject is still the body
// it read; nil otherwise.
func respFor(ev *Event) *respMeta {
	if r := ev.resp; r != nil && r.body != nil && len(r.body) == len(ev.ResponseObject) &&
		unsafe.SliceData(r.body) == unsafe.SliceData(ev.ResponseObject) {
		return r
	}
	return nil
}

// responseMeta is decodeBodyMeta(ev.ResponseObject), from what the decoder read when it decoded
// ev if ev.ResponseObject is still the body it read.
func responseMeta(ev *Event) (BodyMeta, error) {
	if r := respFor(ev); r != nil {
		if !utf8.Valid(r.body[:r.metaEnd]) {
			return BodyMeta{}, errNotUTF8
		}
		return r.meta, nil
	}
	return DecodeBodyMeta(ev.ResponseObject)
}

// responseLayout is the Layout of ev.ResponseObject the decoder recorded, or nil.
func ResponseLayout(ev *Event) *objdiff.Layout {
	if r := respFor(ev); r != nil {
		return r.layout
	}
	return nil
}

// bodyMetadata reads the metadata member of an object body into m.
func (d *eventDecoder) bodyMetadata(m *BodyMeta, base int) error {
	if d.ws() != '{' {
		return d.skipValue()
	}
	if d.rec != nil {
		d.rec.Open(d.pos - d.recBase)
	}
	d.pos++
	m.MetaHash = 1
	mf := objdiff.ManagedFields{Absent: true}
	for first := true; ; first = false {
		name, more, err := d.nextMember(first)
		if err != nil {
			return err
		}
		if !more {
			m.ManagedFields, m.ManagedFieldsKnown = mf, true
			return nil
		}
		switch string(name) {
		case "managedFields":
			d.ws()
			start := d.pos
			if err = d.skipValue(); err == nil {
				if mf.Absent { // the first one, as Snapshot strips
					mf = objdiff.ManagedFields{Start: start - base, End: d.pos - base}
				}
			}
		case "labels", "annotations", "ownerReferences":
			h := maphash.Bytes(metaSeed, name)
			var v []byte
			if v, err = d.readRaw(); err == nil {
				if v == nil {
					v = nullValue
				}
				m.MetaHash = (m.MetaHash*1099511628211^h)*1099511628211 ^ maphash.Bytes(metaSeed, v)
				if m.MetaHash == 0 {
					m.MetaHash = 1
				}
			}
		case "name":
			m.Name, err = d.metaString()
		case "namespace":
			m.Namespace, err = d.metaString()
		case "uid":
			m.UID, err = d.metaString()
		case "resourceVersion":
			m.ResourceVersion, err = d.metaString()
		case "deletionTimestamp":
			m.DeletionTimestamp, err = d.metaString()
		case "deletionGracePeriodSeconds":
			m.GracePeriod, err = d.metaInt()
		case "finalizers":
			m.Finalizers, err = d.metaStrings(m.Finalizers[:0])
		default:
			err = d.skipValue()
		}
		if err != nil {
			return err
		}
	}
}

// nullValue is the JSON null that readRaw returns as nil.
var nullValue = []byte("null")

// metaString reads a string value; any other value is skipped and reads as "".
func (d *eventDecoder) metaString() (string, error) {
	if d.ws() != '"' {
		return "", d.skipValue()
	}
	b, err := d.readStr()
	return string(b), err
}

// metaInt reads an integer; any other value is skipped and reads as 0 (a fraction or a number
// too large too).
func (d *eventDecoder) metaInt() (int64, error) {
	if c := d.ws(); c != '-' && !isDigit(c) {
		return 0, d.skipValue()
	}
	start := d.pos
	if err := d.scanNumber(); err != nil {
		return 0, err
	}
	n, _ := strconv.ParseInt(string(d.data[start:d.pos]), 10, 64)
	return n, nil
}

// metaStrings appends the non-empty strings of an array to dst; other values are skipped.
func (d *eventDecoder) metaStrings(dst []string) ([]string, error) {
	if d.ws() != '[' {
		return dst, d.skipValue()
	}
	if d.rec != nil {
		d.rec.Open(d.pos - d.recBase)
	}
	d.pos++
	for first := true; ; first = false {
		more, err := d.nextElement(first)
		if err != nil || !more {
			return dst, err
		}
		s, err := d.metaString()
		if err != nil {
			return dst, err
		}
		if s != "" {
			dst = append(dst, s)
		}
	}
}

// ResponseIsObject decodes the type and metadata of a response body and reports whether the body
// is the object ref names, or its metadata: not a Status, Scale, Binding or other subresource
// type, in the same API group, with the same name and namespace (when ref has them). A
// subresource response counts only for "status", whose requests return the whole object. A
// delete that returns the object (it has finalizers, or the server answers 200 with it) counts
// too.
//
// A metadata-only client (the garbage collector's, or any client that asks for
// PartialObjectMetadata) gets the object's metadata without its spec and status: it counts, and
// meta.Kind is then "PartialObjectMetadata", so that callers read its
// metadata but do not take the body for the object.
func ResponseIsObject(ref *ObjectReference, ev *Event) (BodyMeta, bool) {
	if ref.Subresource != "" && ref.Subresource != "status" {
		return BodyMeta{}, false
	}
	meta, err := responseMeta(ev)
	if err != nil {
		return BodyMeta{}, false
	}
	if meta.Name == "" {
		return BodyMeta{}, false
	}
	if meta.Kind == partialMetadataKind {
		if meta.APIVersion != partialMetadataAPIVersion && meta.APIVersion != partialMetadataAPIVersionBeta {
			return BodyMeta{}, false
		}
	} else {
		if !kube.IsObjectKind(meta.Kind) || meta.Kind == "" {
			return BodyMeta{}, false
		}
		group, _, found := strings.Cut(meta.APIVersion, "/")
		if !found {
			group = "" // core group: "v1"
		}
		if group != ref.APIGroup {
			return BodyMeta{}, false
		}
	}
	if (ref.Name != "" && meta.Name != ref.Name) || (ref.Namespace != "" && meta.Namespace != ref.Namespace) ||
		(ref.UID != "" && meta.UID != "" && meta.UID != ref.UID) {
		return BodyMeta{}, false
	}
	return meta, true
}

// The kind and versions of a metadata-only response.
const (
	partialMetadataKind           = "PartialObjectMetadata"
	partialMetadataAPIVersion     = "meta.k8s.io/v1"
	partialMetadataAPIVersionBeta = "meta.k8s.io/v1beta1"
)

// objectRef is ev's objectRef, but for a namespace without the namespace kube-apiserver audits
// requests on a namespace with (its own name; create has none): a namespace is cluster-scoped,
// and its trace must be one.
func Ref(ev *Event) *ObjectReference {
	ref := ev.ObjectRef
	if ref.APIGroup == "" && ref.Resource == "namespaces" && ref.Namespace != "" {
		cp := *ref
		cp.Namespace = ""
		return &cp
	}
	return ref
}

// propagationPolicy reads DeleteOptions.propagationPolicy from a delete's request body; the
// deprecated orphanDependents=true reads as Orphan. "" when absent or unreadable.
func PropagationPolicy(body []byte) string {
	if len(body) == 0 {
		return ""
	}
	d := getDecoder(body)
	defer putDecoder(d)
	if null, err := d.beginObject(); err != nil || null {
		return ""
	}
	var policy string
	orphan := false
	for first := true; ; first = false {
		name, more, err := d.nextMember(first)
		if err != nil {
			return ""
		}
		if !more {
			break
		}
		switch string(name) {
		case "propagationPolicy":
			policy = ""
			if d.ws() == '"' {
				var s []byte
				if s, err = d.readStr(); err == nil {
					policy = string(s)
				}
			} else {
				err = d.skipValue()
			}
		case "orphanDependents":
			orphan = false
			switch d.ws() {
			case 't':
				orphan, err = true, d.literal("true")
			case 'f':
				err = d.literal("false")
			case 'n':
				err = d.literal("null")
			default:
				err = d.unexpected("boolean")
			}
		default:
			err = d.skipValue()
		}
		if err != nil {
			return ""
		}
	}
	if d.finish() != nil {
		return ""
	}
	if policy != "" {
		return policy
	}
	if orphan {
		return "Orphan"
	}
	return ""
}

// isName reports whether the raw JSON string v (quotes included) is want.
func isName(v jsontext.Value, want string) bool {
	if len(v) == len(want)+2 && string(v[1:len(v)-1]) == want {
		return true
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return false
	}
	s, err := jsontext.AppendUnquote(nil, v)
	return err == nil && string(s) == want
}

// readString reads a string value; any other value is skipped and reads as "".
func readString(d *jsontext.Decoder) (string, error) {
	if d.PeekKind() != '"' {
		return "", d.SkipValue()
	}
	v, err := d.ReadValue()
	if err != nil {
		return "", err
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1]), nil
	}
	s, err := jsontext.AppendUnquote(nil, v)
	return string(s), err
}

// listItems reads a List response: its items (raw JSON objects, copies) and its kind and
// apiVersion. items is nil when body is not an object with an items array; a truncated or
// malformed body yields the items read before the fault.
func ListItems(body []byte) (items [][]byte, kind, apiVersion string) {
	if len(body) == 0 {
		return nil, "", ""
	}
	d := jsontext.NewDecoder(bytes.NewReader(body))
	if tok, err := d.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, "", ""
	}
	isList := false
	for d.PeekKind() != '}' {
		name, err := d.ReadValue()
		if err != nil {
			break
		}
		switch {
		case isName(name, "kind"):
			kind, err = readString(d)
		case isName(name, "apiVersion"):
			apiVersion, err = readString(d)
		case isName(name, "items") && d.PeekKind() == '[':
			isList = true
			items, err = readObjects(d, items)
		default:
			err = d.SkipValue()
		}
		if err != nil {
			break
		}
	}
	if !isList || !strings.HasSuffix(kind, "List") {
		return nil, "", ""
	}
	if items == nil {
		items = [][]byte{}
	}
	return items, kind, apiVersion
}

// readObjects appends copies of the objects of an array to dst, skipping other values.
func readObjects(d *jsontext.Decoder, dst [][]byte) ([][]byte, error) {
	if _, err := d.ReadToken(); err != nil {
		return dst, err
	}
	for d.PeekKind() != ']' {
		if d.PeekKind() != '{' {
			if err := d.SkipValue(); err != nil {
				return dst, err
			}
			continue
		}
		v, err := d.ReadValue()
		if err != nil {
			return dst, err
		}
		dst = append(dst, bytes.Clone(v))
	}
	_, err := d.ReadToken()
	return dst, err
}

package linker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/kelemetry/kelemetry/internal/jsonscan"
)

// The linkers read a few fields of an object's metadata from bodies of several kilobytes, most of
// which (managedFields, spec, status) they skip. This is a reader made for that: it checks the
// structure of what it skips (brackets, strings, separators) without building anything, and
// decodes only the members a linker asked for. It was a fifth of the cost of a link job with
// encoding/json's v2 decoder.

// metaWant says which optional members of metadata to decode.
type metaWant uint8

const (
	wantOwners metaWant = 1 << iota
	wantAnnotations
)

// linkMeta is what the linkers read of an object body.
type linkMeta struct {
	kind       string
	name, uid  string
	owners     []ownerReference
	parentLink *string // the kelemetry.io/parent-link annotation
	legacyLink *string // kelemetry.kubewharf.io/parent-link
}

// maxMetaDepth bounds the nesting of skipped values (a hostile body cannot exhaust the stack).
const maxMetaDepth = 512

var errNotObject = errors.New("body is not a JSON object")

// metaReader reads JSON from data at pos.
type metaReader struct {
	data []byte
	pos  int
}

// decodeMetadata reads the top-level kind and metadata members of body into m. It stops once it
// has both, so the usually large spec and status after them are not read.
func decodeMetadata(body []byte, want metaWant) (linkMeta, error) {
	r := metaReader{data: body}
	var m linkMeta
	if r.ws() != '{' {
		return m, errNotObject
	}
	r.pos++
	var haveKind, haveMeta bool
	for first := true; !haveKind || !haveMeta; first = false {
		name, more, err := r.member(first)
		if err != nil || !more {
			return m, err
		}
		switch string(name) {
		case "kind":
			m.kind, err = r.str()
			haveKind = true
		case "metadata":
			err = r.metadata(want, &m)
			haveMeta = true
		default:
			err = r.skip(0)
		}
		if err != nil {
			return linkMeta{}, fmt.Errorf("%s: %w", name, err)
		}
	}
	return m, nil
}

func (r *metaReader) metadata(want metaWant, m *linkMeta) error {
	return r.object(func(name []byte) (err error) {
		switch {
		case string(name) == "name":
			m.name, err = r.str()
		case string(name) == "uid":
			m.uid, err = r.str()
		case string(name) == "ownerReferences" && want&wantOwners != 0:
			m.owners, err = r.ownerRefs()
		case string(name) == "annotations" && want&wantAnnotations != 0:
			err = r.annotations(m)
		default:
			err = r.skip(0)
		}
		return err
	})
}

func (r *metaReader) ownerRefs() ([]ownerReference, error) {
	if r.null() {
		return nil, nil
	}
	if r.ws() != '[' {
		return nil, r.unexpected("array")
	}
	r.pos++
	refs := []ownerReference{}
	for first := true; ; first = false {
		more, err := r.element(first)
		if err != nil || !more {
			return refs, err
		}
		var ref ownerReference
		if err := r.ownerRef(&ref); err != nil {
			return nil, fmt.Errorf("%d: %w", len(refs), err)
		}
		refs = append(refs, ref)
	}
}

func (r *metaReader) ownerRef(ref *ownerReference) error {
	return r.object(func(name []byte) (err error) {
		switch string(name) {
		case "apiVersion":
			ref.APIVersion, err = r.str()
		case "kind":
			ref.Kind, err = r.str()
		case "name":
			ref.Name, err = r.str()
		case "uid":
			ref.UID, err = r.str()
		case "controller":
			ref.Controller, err = r.boolean()
		default:
			err = r.skip(0)
		}
		return err
	})
}

func (r *metaReader) annotations(m *linkMeta) error {
	return r.object(func(name []byte) (err error) {
		var dst **string
		switch string(name) {
		case annotationParentLink:
			dst = &m.parentLink
		case legacyAnnotationParentLink:
			dst = &m.legacyLink
		default:
			return r.skip(0)
		}
		if r.null() {
			*dst = nil
			return nil
		}
		s, err := r.str()
		*dst = &s
		return err
	})
}

// object reads an object, or null, and calls read for each member, when the member's value comes
// next (read must read it).
func (r *metaReader) object(read func(name []byte) error) error {
	if r.null() {
		return nil
	}
	if r.ws() != '{' {
		return r.unexpected("object")
	}
	r.pos++
	for first := true; ; first = false {
		name, more, err := r.member(first)
		if err != nil || !more {
			return err
		}
		if err := read(name); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
}

// ws skips whitespace and returns the next byte (0 at the end).
func (r *metaReader) ws() byte {
	for r.pos < len(r.data) {
		if c := r.data[r.pos]; !jsonscan.IsSpace(c) {
			return c
		}
		r.pos++
	}
	return 0
}

func (r *metaReader) syntax(what string) error {
	if r.pos >= len(r.data) {
		return fmt.Errorf("unexpected end of JSON input %s", what)
	}
	return fmt.Errorf("invalid character %q %s at offset %d", r.data[r.pos], what, r.pos)
}

func (r *metaReader) unexpected(want string) error {
	switch c := r.ws(); {
	case c == '{', c == '[', c == '"', c == 't', c == 'f', c == '-', c >= '0' && c <= '9':
		return fmt.Errorf("want %s, got %s at offset %d", want, kindName(c), r.pos)
	default:
		return r.syntax("at start of value")
	}
}

func kindName(c byte) string {
	switch c {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	default:
		return "number"
	}
}

// member moves to the next member of an object whose '{' was read and returns its name, or
// more == false after the closing '}'.
func (r *metaReader) member(first bool) (name []byte, more bool, err error) {
	c := r.ws()
	if c == '}' {
		r.pos++
		return nil, false, nil
	}
	if !first {
		if c != ',' {
			return nil, false, r.syntax("after object member (want ',' or '}')")
		}
		r.pos++
		c = r.ws()
	}
	if c != '"' {
		return nil, false, r.syntax("at start of object member name")
	}
	raw, err := r.rawString()
	if err != nil {
		return nil, false, err
	}
	if bytes.IndexByte(raw, '\\') >= 0 {
		s, err := unquote(raw)
		if err != nil {
			return nil, false, err
		}
		raw = []byte(s)
	}
	if r.ws() != ':' {
		return nil, false, r.syntax("after object member name (want ':')")
	}
	r.pos++
	return raw[1 : len(raw)-1 : len(raw)-1], true, nil
}

// skipName is member without decoding the name.
func (r *metaReader) skipName(first bool) (more bool, err error) {
	c := r.ws()
	if c == '}' {
		r.pos++
		return false, nil
	}
	if !first {
		if c != ',' {
			return false, r.syntax("after object member (want ',' or '}')")
		}
		r.pos++
		c = r.ws()
	}
	if c != '"' {
		return false, r.syntax("at start of object member name")
	}
	if _, err := r.rawString(); err != nil {
		return false, err
	}
	if r.ws() != ':' {
		return false, r.syntax("after object member name (want ':')")
	}
	r.pos++
	return true, nil
}

// element moves to the next element of an array whose '[' was read, or returns more == false
// after the closing ']'.
func (r *metaReader) element(first bool) (more bool, err error) {
	c := r.ws()
	if c == ']' {
		r.pos++
		return false, nil
	}
	if !first {
		if c != ',' {
			return false, r.syntax("after array element (want ',' or ']')")
		}
		r.pos++
	}
	return true, nil
}

// null reads a null if one comes next.
func (r *metaReader) null() bool {
	if r.ws() == 'n' && bytes.HasPrefix(r.data[r.pos:], []byte("null")) {
		r.pos += 4
		return true
	}
	return false
}

// str reads a string, or null as "".
func (r *metaReader) str() (string, error) {
	if r.null() {
		return "", nil
	}
	if r.ws() != '"' {
		return "", r.unexpected("string")
	}
	raw, err := r.rawString()
	if err != nil {
		return "", err
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), nil
	}
	return unquote(raw)
}

// boolean reads true or false, or null as false.
func (r *metaReader) boolean() (bool, error) {
	switch {
	case r.null():
		return false, nil
	case bytes.HasPrefix(r.data[r.pos:], []byte("true")):
		r.pos += 4
		return true, nil
	case bytes.HasPrefix(r.data[r.pos:], []byte("false")):
		r.pos += 5
		return false, nil
	}
	return false, r.unexpected("boolean")
}

// unquote decodes a JSON string with escapes (rare in metadata).
func unquote(raw []byte) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("string at %q: %w", raw[:min(len(raw), 32)], err)
	}
	return s, nil
}

// rawString reads a string (r.pos is at its '"') and returns it with its quotes. It checks that
// it has no control characters and valid escapes and UTF-8.
func (r *metaReader) rawString() ([]byte, error) {
	start := r.pos
	if end := jsonscan.PlainEnd(r.data, start+1); end >= 0 { // most strings: plain ASCII
		r.pos = end + 1
		return r.data[start : end+1], nil
	}
	end, flags, fault := jsonscan.Scan(r.data, start+1)
	if fault != jsonscan.OK {
		r.pos = end
		switch {
		case end < len(r.data):
			return nil, fmt.Errorf("%v at offset %d", fault, end)
		case fault == jsonscan.Unterminated:
			return nil, r.syntax("in string")
		default:
			return nil, r.syntax("in string escape")
		}
	}
	raw := r.data[start : end+1]
	if flags&jsonscan.NonASCII != 0 && !utf8.Valid(raw) {
		return nil, fmt.Errorf("invalid UTF-8 in string at offset %d", start)
	}
	r.pos = end + 1
	return raw, nil
}

// skip reads any value, checking its structure; depth is the nesting of the value.
func (r *metaReader) skip(depth int) error {
	if depth > maxMetaDepth {
		return fmt.Errorf("JSON nested more than %d levels", maxMetaDepth)
	}
	switch c := r.ws(); c {
	case '"':
		_, err := r.rawString()
		return err
	case '{':
		r.pos++
		for first := true; ; first = false {
			more, err := r.skipName(first)
			if err != nil || !more {
				return err
			}
			if err := r.skip(depth + 1); err != nil {
				return err
			}
		}
	case '[':
		r.pos++
		for first := true; ; first = false {
			more, err := r.element(first)
			if err != nil || !more {
				return err
			}
			if err := r.skip(depth + 1); err != nil {
				return err
			}
		}
	case 't', 'f', 'n':
		for _, lit := range [...]string{"true", "false", "null"} {
			if bytes.HasPrefix(r.data[r.pos:], []byte(lit)) {
				r.pos += len(lit)
				return nil
			}
		}
		return r.syntax("in literal")
	default:
		return r.number()
	}
}

// number reads a JSON number.
func (r *metaReader) number() error {
	start := r.pos
	for r.pos < len(r.data) {
		c := r.data[r.pos]
		if (c < '0' || c > '9') && c != '-' && c != '+' && c != '.' && c != 'e' && c != 'E' {
			break
		}
		r.pos++
	}
	if r.pos == start {
		return r.syntax("at start of value")
	}
	if !json.Valid(r.data[start:r.pos]) {
		return fmt.Errorf("invalid number %q at offset %d", r.data[start:r.pos], start)
	}
	return nil
}

package auditv1

import (
	"bytes"
	"errors"
	"hash/maphash"
	"strconv"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// The jsontext decoder of object bodies that decodeBodyMeta replaced, kept as the reference of
// TestDecodeBodyMetaMatchesReference.

type refMetaDecoder struct {
	buf bytes.Buffer
	dec jsontext.Decoder
}

var refMetaDecoders = sync.Pool{New: func() any { return new(refMetaDecoder) }}

// refDecodeBodyMeta reads apiVersion, kind and metadata.{name,namespace,uid,resourceVersion} from a
// JSON object, skipping every other member without decoding it, and stops as soon as it has the
// three top-level members (kube-apiserver writes them first, so spec and status are not scanned).
func refDecodeBodyMeta(body []byte) (BodyMeta, error) {
	md := refMetaDecoders.Get().(*refMetaDecoder)
	defer func() {
		md.buf = bytes.Buffer{} // drop the references to the body
		md.dec.Reset(&md.buf)
		refMetaDecoders.Put(md)
	}()
	// The decoder parses a bytes.Buffer in place, without copying the body.
	md.buf = *bytes.NewBuffer(body)
	md.dec.Reset(&md.buf)
	d := &md.dec

	var m BodyMeta
	tok, err := d.ReadToken()
	if err != nil {
		return m, err
	}
	if tok.Kind() != '{' {
		return m, errors.New("response object is not a JSON object")
	}
	for d.PeekKind() != '}' {
		name, err := d.ReadValue()
		if err != nil {
			return m, err
		}
		switch {
		case isName(name, "apiVersion"):
			m.APIVersion, err = readString(d)
			m.SeenAPIVersion = true
		case isName(name, "kind"):
			m.Kind, err = readString(d)
			m.SeenKind = true
		case isName(name, "metadata"):
			err = refReadMetadata(d, &m)
			m.SeenMetadata = true
		default:
			err = d.SkipValue()
		}
		if err != nil {
			return m, err
		}
		if m.SeenAPIVersion && m.SeenKind && m.SeenMetadata {
			return m, nil
		}
	}
	return m, nil
}

func refReadMetadata(d *jsontext.Decoder, m *BodyMeta) error {
	if d.PeekKind() != '{' {
		return d.SkipValue()
	}
	if _, err := d.ReadToken(); err != nil {
		return err
	}
	m.MetaHash = 1
	for d.PeekKind() != '}' {
		name, err := d.ReadValue()
		if err != nil {
			return err
		}
		switch {
		case isName(name, "labels"), isName(name, "annotations"), isName(name, "ownerReferences"):
			var v jsontext.Value
			if v, err = d.ReadValue(); err == nil {
				m.MetaHash = (m.MetaHash*1099511628211^maphash.Bytes(metaSeed, name))*1099511628211 ^ maphash.Bytes(metaSeed, v)
				if m.MetaHash == 0 {
					m.MetaHash = 1
				}
			}
		case isName(name, "name"):
			m.Name, err = readString(d)
		case isName(name, "namespace"):
			m.Namespace, err = readString(d)
		case isName(name, "uid"):
			m.UID, err = readString(d)
		case isName(name, "resourceVersion"):
			m.ResourceVersion, err = readString(d)
		case isName(name, "deletionTimestamp"):
			m.DeletionTimestamp, err = readString(d)
		case isName(name, "deletionGracePeriodSeconds"):
			m.GracePeriod, err = refReadInt(d)
		case isName(name, "finalizers"):
			m.Finalizers, err = refReadStrings(d, m.Finalizers[:0])
		default:
			err = d.SkipValue()
		}
		if err != nil {
			return err
		}
	}
	_, err := d.ReadToken() // '}'
	return err
}

// refReadInt reads an integer; any other value is skipped and reads as 0.
func refReadInt(d *jsontext.Decoder) (int64, error) {
	if d.PeekKind() != '0' {
		return 0, d.SkipValue()
	}
	v, err := d.ReadValue()
	if err != nil {
		return 0, err
	}
	// Not an integer (a fraction, too large): reads as 0.
	n, _ := strconv.ParseInt(string(v), 10, 64)
	return n, nil
}

// refReadStrings appends the strings of an array to dst; other values are skipped.
func refReadStrings(d *jsontext.Decoder, dst []string) ([]string, error) {
	if d.PeekKind() != '[' {
		return dst, d.SkipValue()
	}
	if _, err := d.ReadToken(); err != nil {
		return dst, err
	}
	for d.PeekKind() != ']' {
		s, err := readString(d)
		if err != nil {
			return dst, err
		}
		if s != "" {
			dst = append(dst, s)
		}
	}
	_, err := d.ReadToken() // ']'
	return dst, err
}

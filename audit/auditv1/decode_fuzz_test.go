package auditv1

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/kelemetry/kelemetry/internal/objdiff"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzDecodeEventList checks DecodeEventList against encoding/json decoding into the same struct:
// it must not panic, it may reject more than encoding/json does (wrong kind, null items, stricter
// names) but never less, and what it accepts must decode to the same fields.
//
// The seed corpus is in testdata/fuzz/FuzzDecodeEventList. Run with:
//
//	go test ./audit -run '^$' -fuzz FuzzDecodeEventList -fuzztime 60s
func FuzzDecodeEventList(f *testing.F) {
	f.Add([]byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"auditID":"a","verb":"get",` +
		`"user":{"username":"u","groups":["g"]},"objectRef":{"resource":"pods","name":"p"},"responseStatus":{"code":200},` +
		`"requestObject":{"a":[1,"x",null,true,{"b":-1.5e3}]},"stageTimestamp":"2026-11-29T17:09:30.123456Z",` +
		`"annotations":{"k":"v"}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		events, err := DecodeEventList(data)
		if err != nil {
			require.Nil(t, events)
			return
		}
		for _, ev := range events {
			assertResponseMeta(t, ev)
		}
		if hasFoldedNames(data) {
			// encoding/json matches member names case-insensitively, Kubernetes and this package
			// do not: encoding/json may see (and reject) a field this package ignores.
			return
		}
		var ref struct {
			Kind       string   `json:"kind"`
			APIVersion string   `json:"apiVersion"`
			Items      []*Event `json:"items"`
		}
		require.NoError(t, json.Unmarshal(data, &ref), "DecodeEventList accepted what encoding/json rejects")
		for _, ev := range events {
			require.NotNil(t, ev)
		}
		if hasDuplicateNames(data) {
			// encoding/json merges repeated objects where this package keeps the last one.
			return
		}
		require.Len(t, events, len(ref.Items))
		for i, want := range ref.Items {
			require.NotNil(t, want, "item %d", i)
			assertSameEvent(t, want, events[i])
		}
	})
}

// assertSameEvent compares an event decoded by encoding/json (want) with one from this package.
// encoding/json keeps a null body as the raw "null"; this package makes it nil.
func assertSameEvent(t *testing.T, want, got *Event) {
	t.Helper()
	w, g := *want, *got
	if string(w.RequestObject) == "null" {
		w.RequestObject = nil
	}
	if string(w.ResponseObject) == "null" {
		w.ResponseObject = nil
	}
	assert.True(t, w.RequestReceivedTimestamp.Equal(g.RequestReceivedTimestamp))
	assert.True(t, w.StageTimestamp.Equal(g.StageTimestamp))
	w.RequestReceivedTimestamp, g.RequestReceivedTimestamp = time.Time{}, time.Time{}
	w.StageTimestamp, g.StageTimestamp = time.Time{}, time.Time{}
	g.resp = nil
	assert.Equal(t, w, g)
}

// knownJSONNames are the member names this package decodes.
var knownJSONNames = []string{
	"kind", "apiVersion", "items", "level", "auditID", "stage", "requestURI", "verb", "user",
	"impersonatedUser", "sourceIPs", "userAgent", "objectRef", "responseStatus", "requestObject",
	"responseObject", "requestReceivedTimestamp", "stageTimestamp", "annotations", "username", "uid",
	"groups", "resource", "namespace", "name", "apiGroup", "resourceVersion", "subresource", "status",
	"message", "reason", "details", "code", "causes", "field",
}

// hasFoldedNames reports whether data has a string that only case-insensitively equals a known
// member name (or is not JSON that jsontext can walk).
func hasFoldedNames(data []byte) bool {
	dec := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))
	for {
		tok, err := dec.ReadToken()
		if errors.Is(err, io.EOF) {
			return false
		}
		if err != nil {
			return true
		}
		if tok.Kind() != '"' {
			continue
		}
		s := tok.String()
		for _, name := range knownJSONNames {
			if s != name && strings.EqualFold(s, name) {
				return true
			}
		}
	}
}

// hasDuplicateNames reports whether an object in data repeats a member name.
func hasDuplicateNames(data []byte) bool {
	dec := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowInvalidUTF8(true))
	for {
		_, err := dec.ReadToken()
		if errors.Is(err, io.EOF) {
			return false
		}
		if err != nil {
			return true
		}
	}
}

// assertResponseMeta checks that what the decoder noted of ev's response body is what
// decodeBodyMeta reads from it.
func assertResponseMeta(t *testing.T, ev *Event) {
	t.Helper()
	if ev == nil || len(ev.ResponseObject) == 0 {
		return
	}
	if r := respFor(ev); r != nil {
		// The Layout recorded while decoding is the one a scan of the body finds.
		lay, err := objdiff.LayoutOf(ev.ResponseObject)
		require.NoError(t, err, "%s", ev.ResponseObject)
		require.NotNil(t, r.layout, "%s", ev.ResponseObject)
		assert.True(t, lay.Equal(r.layout), "%s", ev.ResponseObject)
	}
	want, wantErr := DecodeBodyMeta(ev.ResponseObject)
	got, err := responseMeta(ev)
	if wantErr != nil {
		assert.Error(t, err, "%s", ev.ResponseObject)
		return
	}
	require.NoError(t, err, "%s", ev.ResponseObject)
	assert.Equal(t, want, got, "%s", ev.ResponseObject)
}

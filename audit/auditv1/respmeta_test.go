package auditv1

import (
	"testing"

	"github.com/kelemetry/kelemetry/internal/fixture"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestResponseMeta: what the decoder notes of each response body while decoding its event is what
// decodeBodyMeta reads from the body, for every fixture body and for bodies of every shape; an
// event whose ResponseObject was replaced is read again.
func TestResponseMeta(t *testing.T) {
	noted := 0
	for _, scenario := range []string{"rollout", "bulk"} {
		for _, line := range fixture.Lines(t, scenario, "webhook-batches.jsonl") {
			evs, err := DecodeEventList(line)
			require.NoError(t, err)
			for _, ev := range evs {
				assertResponseMeta(t, ev)
				if ev.resp != nil && ev.resp.body != nil {
					noted++
				}
			}
		}
	}
	assert.Greater(t, noted, 5000)

	for _, body := range []string{
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","managedFields":[{"manager":"m"}]},"spec":{}}`,
		`{"spec":{"x":1},"metadata":{"name":"p","namespace":"n","uid":"u","resourceVersion":"5","finalizers":["a","b"],"deletionTimestamp":"2026-01-01T00:00:00Z","deletionGracePeriodSeconds":30,"labels":{"a":"b"}},"kind":"Pod","apiVersion":"v1"}`,
		`{"kind":"Pod","metadata":{"name":"p"},"metadata":{"name":"q"},"apiVersion":"v1","metadata":{"name":"r"}}`,
		`{"kind":"Status","apiVersion":"v1","status":"Success"}`,
		`{}`, `[1,2]`, `"x"`, `5`, `null`,
		`{"kind":1,"apiVersion":["v1"],"metadata":"m"}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"` + "\xff" + `"}}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":"` + "\xff" + `"}`,
	} {
		line := []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"auditID":"a","stage":"ResponseComplete","verb":"update",` +
			`"objectRef":{"resource":"pods","name":"p","apiVersion":"v1"},"responseObject":` + body + `}]}`)
		evs, err := DecodeEventList(line)
		require.NoError(t, err, body)
		require.Len(t, evs, 1)
		assertResponseMeta(t, evs[0])
		copied := *evs[0]
		copied.ResponseObject = append([]byte(nil), evs[0].ResponseObject...)
		assertResponseMeta(t, &copied)
		// A body that was changed (another slice) is read again, not taken from the note.
		copied.ResponseObject = []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"other"}}`)
		meta, err := responseMeta(&copied)
		require.NoError(t, err)
		assert.Equal(t, "other", meta.Name)
	}
	// The note and the body's Layout are counted in the queue's byte estimate.
	evs, err := DecodeEventList([]byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"auditID":"a","responseObject":` +
		`{"kind":"Pod","metadata":{"name":"p","labels":{"app":"a-label-long-enough-for-the-layout-to-keep-it"}}}}]}`))
	require.NoError(t, err)
	body := int64(len(evs[0].ResponseObject))
	require.NotNil(t, evs[0].resp.layout)
	layoutBytes := int64(evs[0].resp.layout.Bytes())
	assert.Greater(t, layoutBytes, int64(16))
	assert.Equal(t, body+eventOverhead+respNoteOverhead+layoutBytes, EventBytes(evs[0]))
	assert.Equal(t, body+eventOverhead, EventBytes(&Event{ResponseObject: evs[0].ResponseObject}))
	// A malformed body fails the event as before.
	_, err = DecodeEventList([]byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"auditID":"a","responseObject":{"metadata":{"name":"p"},"spec":{]}}]}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "responseObject")
}

// TestResponseIsObjectMetadataOnly: a PartialObjectMetadata (what a metadata-only client such as
// the garbage collector gets) is the object's metadata, in any API group; a list of them, a
// Table or another object's metadata is not.
func TestResponseIsObjectMetadataOnly(t *testing.T) {
	ref := &ObjectReference{APIGroup: "apps", APIVersion: "v1", Resource: "deployments", Namespace: "ns", Name: "web"}
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"web","namespace":"ns","resourceVersion":"9","deletionTimestamp":"2026-01-01T00:00:00Z"}}`, true},
		{`{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1beta1","metadata":{"name":"web","namespace":"ns"}}`, true},
		{`{"kind":"PartialObjectMetadata","apiVersion":"example.com/v1","metadata":{"name":"web","namespace":"ns"}}`, false},
		{`{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"other","namespace":"ns"}}`, false},
		{`{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{},"items":[]}`, false},
		{`{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"name":"web"}}`, false},
		{`{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web","namespace":"ns"}}`, true},
		{`{"kind":"Deployment","apiVersion":"v1","metadata":{"name":"web","namespace":"ns"}}`, false},
	} {
		line := []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"auditID":"a","stage":"ResponseComplete","verb":"patch",` +
			`"objectRef":{"resource":"deployments","namespace":"ns","name":"web","apiGroup":"apps","apiVersion":"v1"},"responseObject":` + tc.body + `}]}`)
		evs, err := DecodeEventList(line)
		require.NoError(t, err, tc.body)
		meta, ok := ResponseIsObject(ref, evs[0])
		assert.Equal(t, tc.want, ok, tc.body)
		if ok {
			assert.Equal(t, "web", meta.Name)
		}
	}
}

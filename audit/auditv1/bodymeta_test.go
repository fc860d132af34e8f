package auditv1

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/internal/fixture"
	"github.com/kelemetry/kelemetry/internal/objdiff"
)

// TestDecodeBodyMetaMatchesReference checks the in-place scanner of object bodies against the
// jsontext decoder it replaced, on every request and response body of the recorded fixtures and
// on edge cases: the same fields, the same errors, and metadata fingerprints that change exactly
// when the reference's do.
func TestDecodeBodyMetaMatchesReference(t *testing.T) {
	bodies := [][]byte{
		[]byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a\u0062","namespace":"ns","uid":"u","resourceVersion":"7","deletionTimestamp":"2024-01-01T00:00:00Z","deletionGracePeriodSeconds":30,"finalizers":["x","",1,null,"y"],"labels":{"a":"b"}}}`),
		[]byte(` { "metadata" : { "name" : 5, "deletionGracePeriodSeconds": 1.5, "finalizers": "no", "labels": null }, "spec": {"x": [1, {"y": "z"}]}, "kind": null, "apiVersion": "apps/v1" } `),
		[]byte(`{"kind":"Pod","metadata":{"name":"p","deletionGracePeriodSeconds":-4,"annotations":{"k":"v"},"ownerReferences":[{"uid":"o"}]}}`),
		[]byte(`{"metadata":"str","kind":"Status"}`),
		[]byte(`{}`), []byte(`[]`), []byte(`null`), []byte(`"x"`), []byte(``), []byte(`{"kind":`), []byte(`{"kind":"Pod",}`),
		[]byte(`{"metadata":{"name":"p"`), []byte(`{"metadata":{"name":"p"}`), []byte(`{"kind":tru}`),
		[]byte("{\"kind\":\"P\xffd\"}"), []byte("{\"spec\":\"\xff\",\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{}}"),
		[]byte("{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{},\"spec\":\"\xff\"}"),
	}
	for _, fixture := range []string{"bulk", "rollout"} {
		for _, ev := range fixtureEvents(t, fixture) {
			bodies = append(bodies, ev.RequestObject, ev.ResponseObject)
		}
	}
	hashes := map[uint64]uint64{}
	wantHashes := map[uint64]uint64{}
	for i, body := range bodies {
		got, gotErr := DecodeBodyMeta(body)
		want, wantErr := refDecodeBodyMeta(body)
		require.Equal(t, wantErr != nil, gotErr != nil, "body %d %q: error %v, want %v", i, trim(body), gotErr, wantErr)
		if wantErr != nil {
			continue
		}
		gh, wh := got.MetaHash, want.MetaHash
		got.MetaHash, want.MetaHash = 0, 0
		// Where managedFields is: TestSnapshotKnownMatchesSnapshot checks it.
		got.ManagedFields, got.ManagedFieldsKnown = objdiff.ManagedFields{}, false
		require.Equal(t, want, got, "body %d %q", i, trim(body))
		require.Equal(t, wh == 0, gh == 0, "body %d", i)
		// The fingerprints partition the bodies alike.
		if prev, ok := hashes[gh]; ok {
			require.Equal(t, prev, wh, "body %d: same fingerprint as another body, the reference's differs", i)
		}
		if prev, ok := wantHashes[wh]; ok {
			require.Equal(t, prev, gh, "body %d: reference's fingerprint equals another body's, this one differs", i)
		}
		hashes[gh], wantHashes[wh] = wh, gh
	}
	require.Greater(t, len(hashes), 100)
}

func trim(b []byte) []byte {
	if len(b) > 120 {
		return b[:120]
	}
	return b
}

// BenchmarkDecodeBodyMetaReference is the jsontext decoder decodeBodyMeta replaced, to compare
// with BenchmarkConvertBodyMeta/scanner.
func BenchmarkDecodeBodyMetaReference(b *testing.B) {
	var bodies [][]byte
	for _, ev := range fixtureEvents(b, "bulk") {
		if len(ev.ResponseObject) > 0 && ev.ResponseObject[0] == '{' {
			bodies = append(bodies, ev.ResponseObject)
		}
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := refDecodeBodyMeta(bodies[i%len(bodies)]); err != nil {
			b.Fatal(err)
		}
	}
}

// fixtureEvents decodes the events of testdata/<scenario>/audit.jsonl.
func fixtureEvents(tb testing.TB, scenario string) []*Event {
	tb.Helper()
	var events []*Event
	for _, line := range fixture.Lines(tb, scenario, "audit.jsonl") {
		ev, err := DecodeEvent(line)
		require.NoError(tb, err)
		events = append(events, ev)
	}
	return events
}

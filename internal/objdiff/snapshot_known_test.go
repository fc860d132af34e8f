package objdiff

import (
	"bytes"
	"testing"

	"github.com/kelemetry/kelemetry/diff"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSnapshotKnown(t *testing.T) {
	d, err := New(diff.Options{})
	require.NoError(t, err)
	pods := diff.Resource{Resource: "pods"}
	body := []byte(` {"kind":"Pod","metadata":{"name":"p","managedFields":[{"manager":"m"}],"uid":"u"},"spec":{}}`)
	start := bytes.Index(body, []byte(`[{"manager"`))
	end := bytes.Index(body, []byte(`,"uid"`))
	want, err := d.Snapshot(pods, body)
	require.NoError(t, err)
	require.Equal(t, `{"kind":"Pod","metadata":{"name":"p","uid":"u"},"spec":{}}`, string(want))

	got, err := d.snapshotKnown(pods, body, ManagedFields{Start: start, End: end})
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), "cut where the caller found it")

	// Wrong hints are not trusted: the body is scanned as by Snapshot.
	for _, mf := range []ManagedFields{{Start: start + 1, End: end}, {Start: start, End: end - 1}, {Start: 0, End: 3},
		{Start: bytes.Index(body, []byte(`{}`)), End: bytes.Index(body, []byte(`{}`)) + 2}, {Start: start, End: len(body) + 5}} {
		got, err := d.snapshotKnown(pods, body, mf)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got), "%+v", mf)
	}

	plain := []byte(`{"kind":"Pod","metadata":{"name":"p"}}`)
	got, err = d.snapshotKnown(pods, plain, ManagedFields{Absent: true})
	require.NoError(t, err)
	assert.Equal(t, string(plain), string(got))
	plain[2] = 'X'
	assert.NotEqual(t, string(plain), string(got), "a copy")

	// A resource with redactions takes the full rewrite whatever the hint.
	secrets := diff.Resource{Resource: "secrets"}
	secret := []byte(`{"kind":"Secret","metadata":{"name":"s"},"data":{"k":"dmFsdWU="}}`)
	want, err = d.Snapshot(secrets, secret)
	require.NoError(t, err)
	got, err = d.snapshotKnown(secrets, secret, ManagedFields{Absent: true})
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))
	assert.NotContains(t, string(got), "dmFsdWU=")
}

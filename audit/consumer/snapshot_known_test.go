package consumer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/diff"
	"github.com/kelemetry/kelemetry/internal/fixture"
	"github.com/kelemetry/kelemetry/internal/objdiff"
)

// TestSnapshotKnownMatchesSnapshot: the snapshot cut where decodeBodyMeta found managedFields
// is byte for byte the snapshot that scans for it, and its Layout (the decoder's, cut with it)
// is the one a scan of the snapshot finds, for every response body of the fixtures.
func TestSnapshotKnownMatchesSnapshot(t *testing.T) {
	differ, err := objdiff.New(diff.Options{})
	require.NoError(t, err)
	conv := newConverter(Config{}.withDefaults(), differ)
	checked, cut := 0, 0
	for _, scenario := range []string{"rollout", "bulk"} {
		for _, line := range fixture.Lines(t, scenario, "webhook-batches.jsonl") {
			evs, err := auditv1.DecodeEventList(line)
			require.NoError(t, err)
			for _, ev := range evs {
				if ev.ObjectRef == nil || len(ev.ResponseObject) == 0 {
					continue
				}
				meta, ok := auditv1.ResponseIsObject(ev.ObjectRef, ev)
				if !ok {
					continue
				}
				require.True(t, meta.ManagedFieldsKnown, ev.AuditID)
				if !meta.ManagedFields.Absent {
					cut++
				}
				want := conv.snapshot(ev.ObjectRef, ev.ResponseObject)
				got, lay := conv.snapshotKnown(ev.ObjectRef, ev.ResponseObject, &meta, auditv1.ResponseLayout(ev))
				assert.Equal(t, string(want), string(got), ev.AuditID)
				// The Layout carried over from the decoder's is the snapshot's own.
				if assert.NotNil(t, lay, ev.AuditID) {
					wantLay, err := objdiff.LayoutOf(got)
					require.NoError(t, err)
					assert.True(t, wantLay.Equal(lay), ev.AuditID)
				}
				checked++
			}
		}
	}
	assert.Greater(t, checked, 1000)
	assert.Greater(t, cut, 500, "bodies with managedFields")
}

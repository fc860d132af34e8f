package audit

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/diff"
)

// TestSnapshotKnownMatchesSnapshot: the snapshot cut where decodeBodyMeta found managedFields
// is byte for byte the snapshot that scans for it, for every response body of the fixtures.
func TestSnapshotKnownMatchesSnapshot(t *testing.T) {
	differ, err := diff.New(diff.Options{})
	require.NoError(t, err)
	conv := newConverter(ConsumerConfig{}.WithDefaults(), differ)
	checked, cut := 0, 0
	for _, scenario := range []string{"rollout", "bulk"} {
		for _, line := range readFixtureLines(t, scenario, "webhook-batches.jsonl") {
			evs, err := DecodeEventList(line)
			require.NoError(t, err)
			for _, ev := range evs {
				if ev.ObjectRef == nil || len(ev.ResponseObject) == 0 {
					continue
				}
				meta, ok := responseIsObject(ev.ObjectRef, ev.ResponseObject)
				if !ok {
					continue
				}
				require.True(t, meta.managedFieldsKnown, ev.AuditID)
				if !meta.managedFields.Absent {
					cut++
				}
				want := conv.snapshot(ev.ObjectRef, ev.ResponseObject)
				assert.Equal(t, string(want), string(conv.snapshotKnown(ev.ObjectRef, ev.ResponseObject, &meta)), ev.AuditID)
				checked++
			}
		}
	}
	assert.Greater(t, checked, 1000)
	assert.Greater(t, cut, 500, "bodies with managedFields")
}

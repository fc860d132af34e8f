package webhook

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/internal/fixture"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecodeSkippingLeavesOutOnlyWhatSkipSays(t *testing.T) {
	for _, scenario := range []string{"rollout", "bulk"} {
		for bi, data := range fixture.Lines(t, scenario, "webhook-batches.jsonl")[:5] {
			all, skip := skipOdd(t, data)
			got, n, err := auditv1.DecodeEventListSkipping(data, skip)
			require.NoError(t, err)
			var want []*auditv1.Event
			for i, ev := range all {
				if i%2 == 0 {
					want = append(want, ev)
				}
			}
			assert.Equal(t, len(all)-len(want), n, "%s batch %d", scenario, bi)
			assert.Equal(t, want, got, "%s batch %d: the kept events decode as without skipping", scenario, bi)
		}
	}
}

func TestDecodeSkippingEdges(t *testing.T) {
	skipA1 := func(id []byte, stage string) bool { return string(id) == "a1" && stage == "ResponseComplete" }
	list := func(items ...string) []byte {
		return []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + strings.Join(items, ",") + `]}`)
	}
	t.Run("audit ID repeated after the check: the last one wins", func(t *testing.T) {
		evs, n, err := auditv1.DecodeEventListSkipping(list(`{"auditID":"a1","stage":"ResponseComplete","verb":"get","auditID":"a2"}`), skipA1)
		require.NoError(t, err)
		assert.Zero(t, n)
		require.Len(t, evs, 1)
		assert.Equal(t, "a2", evs[0].AuditID)
		assert.Equal(t, "get", evs[0].Verb)
	})
	t.Run("stage after other members", func(t *testing.T) {
		evs, n, err := auditv1.DecodeEventListSkipping(list(`{"auditID":"a1","verb":"get","requestURI":"/x","stage":"ResponseComplete","user":{"username":"u"}}`,
			`{"auditID":"a1","verb":"get","stage":"ResponseStarted"}`), skipA1)
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		require.Len(t, evs, 1)
		assert.Equal(t, "ResponseStarted", evs[0].Stage)
		assert.Equal(t, "a1", evs[0].AuditID)
	})
	t.Run("a skipped item is still checked for syntax", func(t *testing.T) {
		_, _, err := auditv1.DecodeEventListSkipping(list(`{"auditID":"a1","stage":"ResponseComplete","requestObject":{"a":]}`), skipA1)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "items[0]")
	})
	t.Run("a skipped item's kind is checked", func(t *testing.T) {
		_, _, err := auditv1.DecodeEventListSkipping(list(`{"kind":"Pod","auditID":"a1","stage":"ResponseComplete"}`), skipA1)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `wrong kind "Pod"`)
		_, _, err = auditv1.DecodeEventListSkipping(list(`{"auditID":"a1","stage":"ResponseComplete","kind":"Pod"}`), skipA1)
		require.Error(t, err, "a kind after the check is decoded again, and checked")
	})
	t.Run("skipped items free their blocks", func(t *testing.T) {
		items := make([]string, 0, 100)
		for i := range 100 {
			id := "a1"
			if i%10 == 0 {
				id = fmt.Sprint("b", i)
			}
			items = append(items, `{"auditID":"`+id+`","stage":"ResponseComplete","verb":"update"}`)
		}
		evs, n, err := auditv1.DecodeEventListSkipping(list(items...), skipA1)
		require.NoError(t, err)
		assert.Equal(t, 90, n)
		require.Len(t, evs, 10)
		for i, ev := range evs {
			assert.Equal(t, fmt.Sprint("b", i*10), ev.AuditID, "no kept event was overwritten by a skipped one")
			assert.Equal(t, "update", ev.Verb)
		}
	})
}

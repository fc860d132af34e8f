package auditv1

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// parseTimeZ reads what time.Time.UnmarshalJSON reads, the same, or leaves it to it: over edge
// cases and random mutations of timestamps, whatever it accepts UnmarshalJSON accepts as the
// same time and location, and it accepts the forms kube-apiserver writes.
func TestParseTimeZ(t *testing.T) {
	check := func(t *testing.T, s string) bool {
		t.Helper()
		got, ok := parseTimeZ([]byte(s))
		var want time.Time
		err := want.UnmarshalJSON([]byte(s))
		if ok {
			require.NoError(t, err, "parseTimeZ accepted %s, which UnmarshalJSON rejects", s)
			require.Equal(t, want, got, "%s", s)
		}
		return ok
	}
	for _, s := range []string{
		`"2026-12-08T00:54:36Z"`, `"2026-12-08T00:54:36.1Z"`, `"2026-12-08T00:54:36.123456Z"`,
		`"2026-12-08T00:54:36.123456789Z"`, `"2024-02-29T23:59:59.000000Z"`, `"0000-01-01T00:00:00Z"`,
		`"9999-12-31T23:59:59.999999999Z"`, `"2000-02-29T12:00:00Z"`,
	} {
		assert.True(t, check(t, s), "the fast form %s", s)
	}
	for _, s := range []string{
		`"2023-02-29T00:00:00Z"`, `"1900-02-29T00:00:00Z"`, `"2026-04-31T00:00:00Z"`, `"2026-00-01T00:00:00Z"`,
		`"2026-13-01T00:00:00Z"`, `"2026-01-00T00:00:00Z"`, `"2026-01-01T24:00:00Z"`, `"2026-01-01T00:60:00Z"`,
		`"2026-01-01T00:00:60Z"`, `"2026-01-01T00:00:00.Z"`, `"2026-01-01T00:00:00.1234567890Z"`,
		`"2026-01-01T00:00:00,5Z"`, `"2026-01-01T00:00:00+02:00"`, `"2026-01-01t00:00:00Z"`, `"2026-01-01T00:00:00z"`,
		`"2026-1-01T00:00:00Z"`, `"+026-01-01T00:00:00Z"`, `"2026-01-01T00:00:0xZ"`, `"2026-01-01T00:00:00\u005a"`,
		`2026-01-01T00:00:00Z`, `""`, `"Z"`,
	} {
		assert.False(t, check(t, s), "left to UnmarshalJSON: %s", s)
	}
	rng := rand.New(rand.NewPCG(3, 5))
	alphabet := []byte(`0123456789-:.TZ+,"x `)
	accepted := 0
	for range 200_000 {
		b := []byte(`"2024-02-29T23:59:59.123456Z"`)
		if rng.IntN(2) == 0 {
			b = append(b[:20:20], `Z"`...) // no fraction
		}
		for range 1 + rng.IntN(3) {
			switch i := rng.IntN(len(b)); rng.IntN(3) {
			case 0:
				b[i] = alphabet[rng.IntN(len(alphabet))]
			case 1:
				b = append(b[:i:i], b[i+1:]...)
			default:
				b = append(b[:i:i], append([]byte{alphabet[rng.IntN(len(alphabet))]}, b[i:]...)...)
			}
		}
		if check(t, string(b)) {
			accepted++
		}
	}
	t.Logf("parseTimeZ accepted %d of 200,000 mutations", accepted)
	assert.Positive(t, accepted)
}

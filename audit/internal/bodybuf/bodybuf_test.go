package bodybuf

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBodyClass(t *testing.T) {
	for size, want := range map[int64]int{
		1: -1, 8 << 10: -1, 8<<10 + 1: 0, 16 << 10: 0, 16<<10 + 1: 1, 32 << 10: 1,
		200 << 10: 4, 8 << 20: 9, 8<<20 + 1: -1,
	} {
		assert.Equal(t, want, bodyClass(size), size)
		if want >= 0 {
			assert.GreaterOrEqual(t, int64(minPooledBody<<want), size)
			buf, h := New(size)
			assert.Equal(t, int(size), cap(buf))
			assert.Equal(t, minPooledBody<<want, cap(*h.pooled))
			h.Recycle()
			assert.Nil(t, h.pooled)
		}
	}
}

package parallel

import (
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The parts cover [0, n) once, in order, numbered from 0; small work runs once in the caller.
func TestPartsCoverTheRange(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	for _, tc := range []struct{ n, minPart, maxParts, want int }{
		{n: 10, minPart: 256, want: 1},
		{n: 1000, minPart: 256, want: 3},
		{n: 10000, minPart: 256, want: 4},
		{n: 10000, minPart: 256, maxParts: 2, want: 2},
		{n: 0, minPart: 1, want: 1},
	} {
		var mu sync.Mutex
		seen := make([]int, tc.n)
		ranges := map[int][2]int{}
		got := Parts(tc.n, tc.minPart, tc.maxParts, func(part, lo, hi int) {
			mu.Lock()
			defer mu.Unlock()
			ranges[part] = [2]int{lo, hi}
			for i := lo; i < hi; i++ {
				seen[i]++
			}
		})
		assert.Equal(t, tc.want, got, "%+v", tc)
		assert.Len(t, ranges, got)
		for i, c := range seen {
			assert.Equal(t, 1, c, "index %d of %+v", i, tc)
		}
		for k := 1; k < got; k++ {
			assert.Equal(t, ranges[k-1][1], ranges[k][0], "part %d follows part %d", k, k-1)
		}
	}
}

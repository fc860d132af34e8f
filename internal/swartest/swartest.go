// Package swartest checks the SWAR masks of the JSON scanners (eight bytes of a string tested at
// once, the flags in the high bit of each byte) against the byte tables they stand for.
package swartest

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// CheckMask checks that mask flags a word holding a byte safe does not mark, that it flags no
// word of safe bytes only, and that its lowest flag is on the first byte that is not safe (the
// scanners jump there): for every byte value at every position of an otherwise plain word, the
// same after a '"' further on, and for random words of mostly plain bytes.
func CheckMask(t *testing.T, name string, mask func(uint64) uint64, safe *[256]bool) {
	t.Helper()
	check := func(w uint64) {
		first := -1
		for i := range 8 {
			if !safe[byte(w>>(8*i))] {
				first = i
				break
			}
		}
		m := mask(w)
		if first < 0 {
			require.Zero(t, m, "%s(%#x)", name, w)
			return
		}
		require.NotZero(t, m, "%s(%#x)", name, w)
		require.Equal(t, first, bits.TrailingZeros64(m)>>3, "%s(%#x): lowest flag", name, w)
	}
	for pos := range 8 {
		for c := range 256 {
			w := []byte("abcdefgh")
			w[pos] = byte(c)
			check(binary.LittleEndian.Uint64(w))
			w[7-pos] = '"'
			check(binary.LittleEndian.Uint64(w))
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		var w uint64
		for i := range 8 {
			c := byte(rng.UintN(256))
			if rng.UintN(8) != 0 {
				c = byte('a' + rng.UintN(26))
			}
			w |= uint64(c) << (8 * i)
		}
		check(w)
	}
}

package clip

import (
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestString(t *testing.T) {
	assert.Equal(t, "abc", String("abc", 3))
	assert.Equal(t, "ab...", String("abc", 2))
	assert.Equal(t, "...", String("abc", 0))
	// "é" is two bytes: cutting after its first byte keeps neither.
	assert.Equal(t, "a...", String("aéb", 2))
	for n := range 8 {
		assert.True(t, utf8.ValidString(String("héllo wörld", n)), n)
	}
}

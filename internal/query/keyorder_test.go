package query

import (
	"encoding/binary"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"go.opentelemetry.io/otel/trace"
)

// TestKeyLessOrder checks that objects are ordered by their keys as strings (Cluster/Group/
// Resource/Namespace/Name), also when a field is a prefix of another or holds a '/' or a byte
// below it, and that comparing takes no allocation: the query engine sorts thousands of keys.
func TestKeyLessOrder(t *testing.T) {
	keys := []aggregator.ObjectKey{
		{Cluster: "a", Resource: "pods", Namespace: "ns", Name: "p"},
		{Cluster: "a!", Resource: "pods", Namespace: "ns", Name: "p"},
		{Cluster: "a/b", Resource: "pods", Namespace: "ns", Name: "p"},
		{Cluster: "a", Group: "b", Resource: "pods", Namespace: "ns", Name: "p"},
		{Cluster: "a", Resource: "pods", Namespace: "ns", Name: "p0"},
		{Cluster: "a", Resource: "pods", Name: "ns/p"},
		{Cluster: "a", Resource: "pods", Namespace: "ns", Name: strings.Repeat("x", 300)},
		{Cluster: "a", Resource: "pods", Namespace: "ns", Name: strings.Repeat("x", 299) + "!"},
		{},
	}
	for _, a := range keys {
		for _, b := range keys {
			require.Equal(t, strings.Compare(a.String(), b.String()), keyLess(a, b), "%q vs %q", a.String(), b.String())
		}
	}
	// Random keys over a small alphabet around the separator, so that fields often are prefixes
	// of one another and hold '/' or a byte below it.
	rng := rand.New(rand.NewPCG(1, 2))
	field := func() string {
		b := make([]byte, rng.IntN(3))
		for i := range b {
			b[i] = ".-/0a"[rng.IntN(5)]
		}
		return string(b)
	}
	for range 20000 {
		a := aggregator.ObjectKey{Cluster: field(), Group: field(), Resource: field(), Namespace: field(), Name: field()}
		b := aggregator.ObjectKey{Cluster: field(), Group: field(), Resource: field(), Namespace: field(), Name: field()}
		if rng.IntN(2) == 0 {
			b.Cluster, b.Group = a.Cluster, a.Group
		}
		require.Equal(t, strings.Compare(a.String(), b.String()), keyLess(a, b), "%q vs %q", a.String(), b.String())
	}
	a, b := keys[0], keys[4]
	allocs := testing.AllocsPerRun(100, func() {
		if keyLess(a, b) >= 0 {
			t.Fatal("order")
		}
	})
	require.Zero(t, allocs, "allocations per comparison")
}

// TestHashIDIsFNV checks that span IDs of drawn nodes stay what they were: FNV-1a over the parts,
// each followed by a zero byte.
func TestHashIDIsFNV(t *testing.T) {
	for _, parts := range [][]string{{"object", "c//pods/ns/p"}, {}, {""}, {"reference", "a", "b"}, {"dup", "0000000000000001", "3"}} {
		h := fnv.New64a()
		for _, p := range parts {
			_, _ = h.Write([]byte(p))
			_, _ = h.Write([]byte{0})
		}
		var want trace.SpanID
		binary.BigEndian.PutUint64(want[:], h.Sum64())
		if !want.IsValid() {
			want[7] = 1
		}
		require.Equal(t, want, hashID(parts...), "%q", parts)
	}
}

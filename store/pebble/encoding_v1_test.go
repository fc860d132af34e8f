package pebble

import (
	"context"
	"encoding/hex"
	"hash/crc32"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/store/internal/query"
	"github.com/kelemetry/kelemetry/telemetry"
)

// v1Span is v1Encoded decoded: a span written by Kelemetry before encoding version 2.
func v1Span() *aggregator.Span {
	at := time.Date(2026, 11, 29, 17, 1, 0, 5000, time.UTC)
	return &aggregator.Span{
		TraceID:    trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:     trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8},
		ParentID:   trace.SpanID{8, 7, 6, 5, 4, 3, 2, 1},
		Kind:       aggregator.KindEvent,
		Source:     "audit",
		Name:       "update",
		Object:     aggregator.ObjectRef{Cluster: "c", Group: "apps", Version: "v1", Resource: "replicasets", Namespace: "ns", Name: "web-1", UID: "u-1"},
		Window:     time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC),
		Start:      time.Date(2026, 11, 29, 17, 1, 0, 0, time.UTC),
		End:        at,
		Attributes: aggregator.Attrs{{Key: aggregator.AttrUser, Value: "alice"}, {Key: "custom.key", Value: "v"}},
		Logs: []aggregator.Log{{Time: at, Type: aggregator.LogTypeDiff, Message: "spec.replicas 3 -> 4",
			Attributes: aggregator.Attrs{{Key: "kelemetry.diff.path", Value: "spec.replicas"}, {Key: "kelemetry.diff.op", Value: "replace"}}}},
		Error: true,
	}
}

// v1Encoded is v1Span as the encoding of version 1 wrote it (recorded with that code).
const v1Encoded = "010102030405060708090a0b0c0d0e0f1001020304050607080807060504030201010305617564697406757064617465016304617070730276310b7265706c69636173657473026e73057765622d3103752d31808085cbf3a9c9ec3180e0ba84bf03904e0209757365722e6e616d6505616c6963650a637573746f6d2e6b657901760101904e046469666614737065632e7265706c696361732033202d3e203402136b656c656d657472792e646966662e706174680d737065632e7265706c69636173116b656c656d657472792e646966662e6f70077265706c616365"

// TestSpanEncodingReadsVersion1: spans stored in encoding version 1 still decode; a version 2
// encoding of the same span is a fifth smaller or more, names written as one byte.
func TestSpanEncodingReadsVersion1(t *testing.T) {
	v1, err := hex.DecodeString(v1Encoded)
	require.NoError(t, err)
	got, err := decodeSpan(v1)
	require.NoError(t, err)
	assert.Equal(t, v1Span(), got)
	for i := range v1 {
		_, err := decodeSpan(v1[:i])
		assert.ErrorIs(t, err, errCorrupt, "truncated at %d", i)
	}

	v2 := appendSpan(nil, v1Span())
	assert.Equal(t, byte(spanEncodingVersion), v2[0])
	got, err = decodeSpan(v2)
	require.NoError(t, err)
	assert.Equal(t, v1Span(), got)
	assert.Less(t, len(v2), len(v1)*4/5, "v2 %d bytes, v1 %d", len(v2), len(v1))

	// A name code past the list is corrupt, not a panic.
	bad := appendName(nil, "kelemetry.diff.op")
	bad[0] = byte(len(wellKnown) + 1)
	d := decoder{s: string(bad), names: true}
	_ = d.name()
	assert.True(t, d.err)
}

// TestWellKnownNamesFrozen: the list of well-known names is part of the stored format. Changing
// or moving an entry would make stored spans read with other attribute keys: this test fails
// then. (Adding names needs a new encoding version.)
func TestWellKnownNamesFrozen(t *testing.T) {
	assert.Less(t, len(wellKnown), 255, "one byte a name")
	assert.Len(t, wellKnownCode, len(wellKnown), "no name twice")
	assert.Equal(t, uint32(0xe1f71510), crc32.ChecksumIEEE([]byte(strings.Join(wellKnown[:], "\n"))),
		"the well-known names of encoding version 2 changed")
}

// TestPebbleUpgradesVersion1Store: a store written by an earlier Kelemetry (schema version 1,
// spans in encoding version 1) opens, reads its old spans beside new ones and is marked version
// 2 once writable; opened read-only (a full disk) it stays version 1 until it recovers. A store
// of an unknown version is refused with a clear error.
func TestPebbleUpgradesVersion1Store(t *testing.T) {
	ctx := context.Background()
	old := v1Span()
	tid := old.TraceID
	w := query.WindowNanos(old)
	v1, err := hex.DecodeString(v1Encoded)
	require.NoError(t, err)
	writeV1 := func(dir string) {
		p := openFaultPebble(t, Config{Dir: dir}, vfs.Default)
		asBeforeSegments(t, p)
		newer := *old
		newer.SpanID = trace.SpanID{9, 9, 9, 9, 9, 9, 9, 9}
		newer.Attributes = aggregator.Attrs{{Key: aggregator.AttrVerb, Value: "patch"}}
		require.NoError(t, p.Export(ctx, []*aggregator.Span{&newer}))
		require.NoError(t, p.db.Set(appendSpanKey(nil, w, -1, tid, old.SpanID), v1, pebble.Sync))
		require.NoError(t, p.db.Set(versionKey, []byte(schemaVersionV1), pebble.Sync))
		require.NoError(t, p.close())
	}
	version := func(p *Store) string {
		v, closer, err := p.db.Get(versionKey)
		require.NoError(t, err)
		defer closer.Close()
		return string(v)
	}
	readBoth := func(p *Store) {
		spans, err := p.GetTrace(ctx, tid)
		require.NoError(t, err)
		require.Len(t, spans, 2)
		byID := map[trace.SpanID]*aggregator.Span{}
		for _, sp := range spans {
			byID[sp.SpanID] = sp
		}
		assert.Equal(t, old, byID[old.SpanID])
		assert.Equal(t, "patch", byID[trace.SpanID{9, 9, 9, 9, 9, 9, 9, 9}].Attributes[0].Value)
	}

	dir := t.TempDir()
	writeV1(dir)
	p := openFaultPebble(t, Config{Dir: dir}, vfs.Default)
	readBoth(p)
	assert.Equal(t, schemaVersion, version(p))
	require.NoError(t, p.close())

	dir = t.TempDir()
	writeV1(dir)
	ffs := newFaultFS()
	ffs.full.Store(true)
	withinTime(t, 30*time.Second, "open on a full disk", func() {
		p = openFaultPebble(t, Config{Dir: dir}, ffs)
	})
	readBoth(p)
	assert.Equal(t, schemaVersionV1, version(p), "not written while read-only")
	ffs.full.Store(false)
	withinTime(t, 10*time.Second, "recovery", func() { p.recoverStep(ctx) })
	require.NoError(t, p.Health(ctx))
	assert.Equal(t, schemaVersion, version(p))
	readBoth(p)
	require.NoError(t, p.close())

	dir = t.TempDir()
	p = openFaultPebble(t, Config{Dir: dir}, vfs.Default)
	require.NoError(t, p.db.Set(versionKey, []byte("5"), pebble.Sync))
	require.NoError(t, p.close())
	_, err = Open(ctx, Config{Dir: dir}, 0, telemetry.Settings{Logger: slog.New(slog.DiscardHandler)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `schema version "5"`)
}

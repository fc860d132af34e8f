package pebble

import (
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/store/internal/storetest"
)

func TestSpanEncodingRoundTrip(t *testing.T) {
	full := &aggregator.Span{
		TraceID:  trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:   trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8},
		ParentID: trace.SpanID{8, 7, 6, 5, 4, 3, 2, 1},
		Kind:     aggregator.KindLink,
		Source:   "link",
		Name:     "parent deployments/web",
		Object:   aggregator.ObjectRef{Cluster: "c", Group: "apps", Version: "v1", Resource: "replicasets", Namespace: "ns", Name: "web-1", UID: "u-1"},
		Window:   t0,
		Start:    t0.Add(-time.Hour), // before the window: negative delta
		End:      t0.Add(time.Hour + 7),
		Attributes: aggregator.Attrs{
			{Key: aggregator.AttrUser, Value: "alice"},
			{Key: "empty", Value: ""},
			{Key: "unicode", Value: "héllo \x00 wörld"},
		},
		Logs: []aggregator.Log{
			{Time: t0.Add(time.Minute + 3), Type: aggregator.LogTypeError, Message: "conflict", Attributes: aggregator.Attrs{{Key: "code", Value: "409"}}},
			{Type: aggregator.LogTypeDiff, Message: "no time"},
			{Time: t0.Add(-2 * time.Hour), Type: "", Message: ""},
		},
		Link:  &aggregator.Link{Target: aggregator.ObjectRef{Cluster: "c", Group: "apps", Resource: "deployments", Namespace: "ns", Name: "web"}, Role: aggregator.RoleParent, Class: "children"},
		Error: true,
	}
	noWindow := *full
	noWindow.Window = time.Time{}
	for _, tc := range []struct {
		name string
		span *aggregator.Span
	}{
		{"full", full},
		{"empty", &aggregator.Span{}},
		{"zero parent, object kind", &aggregator.Span{TraceID: full.TraceID, SpanID: full.SpanID, Kind: aggregator.KindObject, Window: t0, Start: t0, End: t0.Add(win)}},
		{"event without end", &aggregator.Span{Kind: aggregator.KindEvent, Window: t0, Start: t0.Add(time.Second)}},
		{"without start", &aggregator.Span{Kind: aggregator.KindEvent, Window: t0, End: t0.Add(time.Second)}},
		{"without window", &noWindow},
		{"unknown kind", &aggregator.Span{Kind: "custom", Window: t0, Start: t0, End: t0}},
		{"times before 1970", &aggregator.Span{Window: time.Unix(-100, 5).UTC(), Start: time.Unix(-50, 0).UTC(), End: time.Unix(10, 0).UTC()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enc := appendSpan(nil, tc.span)
			got, err := decodeSpan(enc)
			require.NoError(t, err)
			assert.Equal(t, tc.span, got)

			// Every truncation and a trailing byte are rejected, without a panic.
			for i := range enc {
				_, err := decodeSpan(enc[:i])
				assert.ErrorIs(t, err, errCorrupt, "truncated at %d", i)
			}
			_, err = decodeSpan(append(enc, 0))
			assert.ErrorIs(t, err, errCorrupt)
		})
	}
}

func TestSpanEncodingIsCompact(t *testing.T) {
	sp := storetest.BenchSpans(0)[2]
	enc := appendSpan(nil, sp)
	o := sp.Object
	payload := len(sp.Source) + len(sp.Name) + len(o.Cluster) + len(o.Group) + len(o.Version) + len(o.Resource) +
		len(o.Namespace) + len(o.Name) + len(o.UID)
	for _, a := range sp.Attributes {
		payload += len(a.Key) + len(a.Value)
	}
	for _, l := range sp.Logs {
		payload += len(l.Type) + len(l.Message)
	}
	// 35 bytes of IDs, flags and kind, a few bytes per time, one length byte per string.
	assert.Less(t, len(enc)-payload, 100, "encoded %d bytes for %d bytes of strings", len(enc), payload)
}

func TestRefEncodingRoundTrip(t *testing.T) {
	r := aggregator.ObjectRef{Cluster: "c", Group: "apps", Version: "v1", Resource: "deployments", Namespace: "ns", Name: "web", UID: "u"}
	got, err := decodeRefValue(appendRefValue(nil, &r))
	require.NoError(t, err)
	assert.Equal(t, r, got)
	_, err = decodeRefValue([]byte{9})
	assert.ErrorIs(t, err, errCorrupt)
}

func TestKeyOrder(t *testing.T) {
	// Window keys sort in time order, negative times included.
	times := []int64{-5e18, -1, 0, 1, 5e18}
	for i := 1; i < len(times); i++ {
		a := appendWindow(nil, times[i-1])
		b := appendWindow(nil, times[i])
		assert.Less(t, string(a), string(b))
		assert.Equal(t, times[i], readWindow(b))
	}
	// Object keys sort like ObjectKey.String, whatever the separators compare to.
	x := aggregator.ObjectRef{Cluster: "a", Name: "n"}
	y := aggregator.ObjectRef{Cluster: "a-b", Name: "n"}
	kx := appendObjectKey(nil, appendObjectString(nil, &x), 0, trace.TraceID{})
	ky := appendObjectKey(nil, appendObjectString(nil, &y), 0, trace.TraceID{})
	assert.Equal(t, x.String() < y.String(), string(kx) < string(ky))
	assert.Equal(t, []byte("b"), prefixEnd([]byte("a")))
	assert.Equal(t, []byte("b"), prefixEnd([]byte("a\xff")))
	assert.Nil(t, prefixEnd([]byte("\xff")))
}

// TestEncodedLinkAndLinkSlab: the link flag is read where every encoding version keeps it, and
// the spans of one trace decoded with an arena get links of their own from its slab.
func TestEncodedLinkAndLinkSlab(t *testing.T) {
	link := func(name string) *aggregator.Span {
		return &aggregator.Span{Kind: aggregator.KindLink, Window: t0, Start: t0, End: t0, SpanID: trace.SpanID{byte(len(name))},
			Link: &aggregator.Link{Target: aggregator.ObjectRef{Resource: "pods", Name: name}, Role: aggregator.RoleChild, Class: "children"}}
	}
	event := &aggregator.Span{Kind: aggregator.KindEvent, Window: t0, Start: t0, Error: true}
	v1, err := hex.DecodeString(v1Encoded)
	require.NoError(t, err)
	assert.False(t, encodedLink(string(v1)), "version 1 event")
	assert.False(t, encodedLink(string(appendSpan(nil, event))))
	assert.True(t, encodedLink(string(appendSpan(nil, link("a")))))
	assert.False(t, encodedLink(""), "too short")

	spans := []*aggregator.Span{link("a"), event, link("bb"), link("ccc")}
	var ar spanArena
	ar.reset(len(spans))
	links := 0
	for _, sp := range spans {
		if encodedLink(string(appendSpan(nil, sp))) {
			links++
		}
	}
	require.Equal(t, 3, links)
	ar.setLinks(links)
	got := make([]aggregator.Span, len(spans))
	for i, sp := range spans {
		require.NoError(t, decodeSpanWith(&got[i], string(appendSpan(nil, sp)), &ar))
		assert.Equal(t, *sp, got[i])
	}
	got[0].Link.Target.Name = "changed"
	assert.Equal(t, "bb", got[2].Link.Target.Name, "links share no memory")
	assert.Equal(t, "ccc", got[3].Link.Target.Name)
	// A link setLinks was not told of still decodes, into a Link of its own.
	var extra aggregator.Span
	require.NoError(t, decodeSpanWith(&extra, string(appendSpan(nil, link("d"))), &ar))
	assert.Equal(t, "d", extra.Link.Target.Name)
	assert.Equal(t, "ccc", got[3].Link.Target.Name)
}

// TestArenaObjectReuse: decoding a trace's spans with an arena reuses the object reference of
// the span before when it is encoded alike, and only then: every span decodes to what was
// encoded, and truncated spans are still corrupt.
func TestArenaObjectReuse(t *testing.T) {
	a := aggregator.ObjectRef{Cluster: "c", Group: "apps", Version: "v1", Resource: "replicasets", Namespace: "ns", Name: "web-1", UID: "u"}
	b := a
	b.Name = "web-10" // a's encoding is not a prefix of b's: the name's length differs
	c := a
	c.UID = "u2"
	var spans []*aggregator.Span
	for i, o := range []aggregator.ObjectRef{a, a, b, b, a, c, {}, a} {
		spans = append(spans, &aggregator.Span{Kind: aggregator.KindEvent, SpanID: trace.SpanID{byte(i + 1)}, Object: o, Window: t0, Start: t0})
	}
	var ar spanArena
	ar.reset(len(spans))
	for i, sp := range spans {
		enc := string(appendSpan(nil, sp))
		var got aggregator.Span
		require.NoError(t, decodeSpanWith(&got, enc, &ar))
		assert.Equal(t, *sp, got, "span %d", i)
		for n := range enc {
			var bad aggregator.Span
			assert.ErrorIs(t, decodeSpanWith(&bad, enc[:n], &ar), errCorrupt, "span %d truncated at %d", i, n)
		}
	}
}

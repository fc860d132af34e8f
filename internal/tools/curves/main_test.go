package main

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInts(t *testing.T) {
	got, err := ints("0, 1000000,5000000")
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1_000_000, 5_000_000}, got)
	for _, bad := range []string{"", "1,1", "5,2", "-1", "x"} {
		_, err := ints(bad)
		assert.Error(t, err, bad)
	}
}

func TestParseNeedsBinariesAndFixture(t *testing.T) {
	var out bytes.Buffer
	_, err := parse([]string{"--kelemetry", "k"}, &out)
	require.Error(t, err)
	o, err := parse([]string{"--kelemetry", "k", "--auditload", "a", "--trees", "10,20", "f.gz"}, &out)
	require.NoError(t, err)
	assert.Equal(t, "f.gz", o.fixture)
	assert.Equal(t, []int{10, 20}, o.trees)
	assert.Equal(t, []int{0, 1_000_000, 5_000_000, 10_000_000}, o.points)
}

func TestFormats(t *testing.T) {
	assert.Equal(t, "1,234,567", thousands(1234567))
	assert.Equal(t, "999", thousands(999))
	assert.Equal(t, "10 million", millions(10_000_000))
	assert.Equal(t, "0", millions(0))
	assert.Equal(t, "250,000", millions(250_000))
	for v, want := range map[float64]float64{0.3: 0.5, 1: 1, 7: 10, 120: 200, 480: 500, 0: 1} {
		assert.Equal(t, want, niceCeil(v), "%v", v)
	}
}

// The report and the picture hold every point measured; the picture is well-formed SVG.
func TestReportAndPicture(t *testing.T) {
	emb := []point{
		{stored: 0, evPerS: 40000, queries: []time.Duration{50 * time.Millisecond, 400 * time.Millisecond}, slowest: []time.Duration{60 * time.Millisecond, 450 * time.Millisecond}},
		{stored: 10_000_000, evPerS: 36000, queries: []time.Duration{55 * time.Millisecond, 420 * time.Millisecond}, slowest: []time.Duration{70 * time.Millisecond, 480 * time.Millisecond}, queryRSS: 300 << 20},
	}
	jae := []point{{stored: 1_000_000, queries: []time.Duration{80 * time.Millisecond, 900 * time.Millisecond}, slowest: []time.Duration{90 * time.Millisecond, time.Second}}}
	c := &curves{o: options{copies: 3, runs: 3, trees: []int{1000, 10000}}}
	var out bytes.Buffer
	c.report(&out, emb, jae)
	text := out.String()
	assert.Contains(t, text, "| 10 million | 36,000 | 27.8 µs | +11.1% |")
	assert.Contains(t, text, "| embedded store | 10 million | 55 ms (70 ms) | 420 ms (480 ms) | 300 MiB |\n")
	assert.Contains(t, text, "| Jaeger (Badger) through jaeger.storage.v2 | 1 million | 80 ms (90 ms) | 900 ms (1000 ms) | |\n")

	svg := drawSVG(c.o.trees, emb, jae)
	dec := xml.NewDecoder(strings.NewReader(svg))
	polylines := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			polylines++
		}
	}
	// Ingest; 1,000 and 10,000 Pods from each reader.
	assert.Equal(t, 5, polylines)
	assert.Contains(t, svg, "10,000 pods, Jaeger reader")
	assert.Contains(t, svg, "100 ms")
}

// Results written by one run are read back as the same points (--jaeger-results).
func TestResultsRoundTrip(t *testing.T) {
	ps := []point{{stored: 1_000_000, evPerS: 1234, queries: []time.Duration{1500 * time.Microsecond, 2 * time.Second}, slowest: []time.Duration{3 * time.Millisecond, 4 * time.Second}, queryRSS: 123 << 20}}
	assert.Equal(t, ps, fromJSON(toJSON(ps)))
}

// peakRSS reads a live process's high-water mark: this test's own, at least the heap it holds.
func TestPeakRSS(t *testing.T) {
	hold := make([]byte, 64<<20)
	for i := range hold {
		hold[i] = byte(i)
	}
	rss, err := peakRSS(os.Getpid())
	require.NoError(t, err)
	assert.GreaterOrEqual(t, rss, int64(64<<20))
	assert.Equal(t, byte(7), hold[7])
	_, err = peakRSS(-1)
	assert.Error(t, err)
}

// A point of several rounds: per tree the median and the slowest of every query of every round,
// the median ingest, the highest RSS.
func TestSummarize(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	p := summarize(5, []trial{
		{times: [][]time.Duration{ms(50, 40), ms(400)}, rss: 300, rate: 20000},
		{times: [][]time.Duration{ms(45, 90), ms(500)}, rss: 350, rate: 18000},
		{times: [][]time.Duration{ms(41, 42), ms(450)}, rss: 320, rate: 25000},
	})
	assert.Equal(t, 5, p.stored)
	assert.Equal(t, ms(45, 450), p.queries)
	assert.Equal(t, ms(90, 500), p.slowest)
	assert.Equal(t, 20000.0, p.evPerS)
	assert.Equal(t, int64(350), p.queryRSS)
}

// The copy of a store folder shares its tables and blob files, copies the rest, and leaves the
// lock file and the audit queue out: writing to the copy's log changes nothing in the original.
func TestLinkTree(t *testing.T) {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "copy")
	for name, body := range map[string]string{"000001.sst": "table", "000002.blob": "blob", "000003.log": "wal", "MANIFEST-000004": "m", "LOCK": ""} {
		require.NoError(t, os.WriteFile(filepath.Join(src, name), []byte(body), 0o644))
	}
	require.NoError(t, os.Mkdir(filepath.Join(src, "audit-queue"), 0o755))
	require.NoError(t, linkTree(src, dst))
	entries, err := os.ReadDir(dst)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{"000001.sst", "000002.blob", "000003.log", "MANIFEST-000004"}, names)
	for name, shared := range map[string]bool{"000001.sst": true, "000002.blob": true, "000003.log": false, "MANIFEST-000004": false} {
		a, err := os.Stat(filepath.Join(src, name))
		require.NoError(t, err)
		b, err := os.Stat(filepath.Join(dst, name))
		require.NoError(t, err)
		assert.Equal(t, shared, os.SameFile(a, b), name)
	}
	f, err := os.OpenFile(filepath.Join(dst, "000003.log"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString("more")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	b, err := os.ReadFile(filepath.Join(src, "000003.log"))
	require.NoError(t, err)
	assert.Equal(t, "wal", string(b))
}

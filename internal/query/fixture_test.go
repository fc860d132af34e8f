package query_test

import (
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/frontendtest"
	"github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/store"
	"github.com/kelemetry/kelemetry/store/memory"
	"github.com/kelemetry/kelemetry/telemetry"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// The rollout fixture: recorded between 17:00 and 17:11 UTC, replayed as cluster "test".
var (
	rolloutFrom = frontendtest.RolloutFrom
	rolloutTo   = frontendtest.RolloutTo
)

// rollout is the bundled rollout replayed through the real pipeline (decoder, consumer,
// aggregator with the owner and annotation linkers) into a memory store, once per test binary.
func rollout(t testing.TB) *memory.Store { return frontendtest.Rollout(t) }

func newAPI(t testing.TB, r store.Reader) (*query.JaegerAPI, *httptest.Server) {
	t.Helper()
	api := query.NewJaegerAPI(query.NewEngine(r, 0, query.Config{}), telemetry.Settings{})
	mux := http.NewServeMux()
	api.Register(mux)
	query.NewNativeAPI(r, telemetry.Settings{}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return api, srv
}

// renderText draws a Jaeger trace as an indented outline for golden files: service, operation,
// start offset from the trace start and duration, warnings, selected tags and every log (without
// diff and snapshot fields).
func renderText(tr query.JaegerTrace) string {
	var b strings.Builder
	children := map[string][]query.JaegerSpan{}
	var roots []query.JaegerSpan
	var t0 int64
	for i, s := range tr.Spans {
		if i == 0 || s.StartTime < t0 {
			t0 = s.StartTime
		}
		if len(s.References) == 0 {
			roots = append(roots, s)
			continue
		}
		children[s.References[0].SpanID] = append(children[s.References[0].SpanID], s)
	}
	ids := map[string]string{}
	for i, s := range tr.Spans {
		ids[s.SpanID] = fmt.Sprintf("#%d", i)
	}
	off := func(us int64) string { return (time.Duration(us-t0) * time.Microsecond).String() }
	var walk func(s query.JaegerSpan, depth int)
	walk = func(s query.JaegerSpan, depth int) {
		ind := strings.Repeat("  ", depth)
		fmt.Fprintf(&b, "%s%s [%s] %s @%s +%s\n", ind, ids[s.SpanID], tr.Processes[s.ProcessID].ServiceName, s.OperationName,
			off(s.StartTime), (time.Duration(s.Duration) * time.Microsecond).String())
		for i, r := range s.References {
			if i == 0 {
				continue
			}
			fmt.Fprintf(&b, "%s  ref %s %s\n", ind, r.RefType, ids[r.SpanID])
		}
		for _, w := range s.Warnings {
			fmt.Fprintf(&b, "%s  warning: %s\n", ind, w)
		}
		var tags []string
		for _, kv := range s.Tags {
			switch kv.Key {
			case "kelemetry.span.kind", "cluster", "group", "resource", "namespace", "name",
				aggregator.AttrCluster, aggregator.AttrGroup, aggregator.AttrResource, aggregator.AttrNamespace,
				aggregator.AttrName, aggregator.AttrUID, aggregator.AttrAuditID, aggregator.AttrSourceIP,
				aggregator.AttrUserAgent, aggregator.AttrResourceVersion, aggregator.AttrNewRV:
				continue
			}
			if strings.HasPrefix(kv.Key, "kelemetry.diff.") || strings.HasPrefix(kv.Key, "kelemetry.snapshot.") {
				continue // the diff package's business
			}
			tags = append(tags, fmt.Sprintf("%s=%v", kv.Key, kv.Value))
		}
		if len(tags) > 0 {
			fmt.Fprintf(&b, "%s  tags: %s\n", ind, strings.Join(tags, " "))
		}
		for _, l := range s.Logs {
			if len(l.Fields) > 0 && l.Fields[0].Key == "event" &&
				(l.Fields[0].Value == aggregator.LogTypeDiff || l.Fields[0].Value == aggregator.LogTypeSnapshot) {
				continue // raw diff and snapshot logs (tree, timeline): see below
			}
			var fs []string
			for _, f := range l.Fields {
				switch f.Key {
				case "user", "responseCode", "userAgent", "sourceIP":
					continue
				case "diff", "verbose diff", "diff note", "snapshot":
					// Whether and what the pipeline diffs belongs to the audit and diff
					// packages; folding them is tested in TestFoldedLogFields.
					continue
				}
				fs = append(fs, fmt.Sprintf("%s=%v", f.Key, f.Value))
			}
			fmt.Fprintf(&b, "%s  log @%s %s\n", ind, off(l.Timestamp), strings.Join(fs, " | "))
		}
		for _, c := range children[s.SpanID] {
			walk(c, depth+1)
		}
	}
	fmt.Fprintf(&b, "trace %s\n", tr.TraceID)
	for _, r := range roots {
		walk(r, 0)
	}
	return b.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./internal/query -run %s -update to create it", t.Name())
	require.Equal(t, string(want), got)
}

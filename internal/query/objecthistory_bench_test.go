package query_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/audittest"
	"github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/store/memory"
)

// configMapWrites is an audit log of a ConfigMap created and then updated n-1 times, one write
// a second, each changing one key and adding another.
func configMapWrites(t testing.TB, n int) string {
	t.Helper()
	var lines []string
	for i := range n {
		data := map[string]string{"counter": fmt.Sprint(i), "static": strings.Repeat("x", 200)}
		for k := 0; k <= i%20; k++ {
			data[fmt.Sprintf("key-%02d", k)] = fmt.Sprintf("value-%d-%d", k, i/20)
		}
		body, err := json.Marshal(map[string]any{"kind": "ConfigMap", "apiVersion": "v1", "data": data,
			"metadata": map[string]any{"name": "cm", "namespace": "default", "uid": "u-cm", "resourceVersion": fmt.Sprint(100 + i)}})
		require.NoError(t, err)
		verb, code := "update", 200
		if i == 0 {
			verb, code = "create", 201
		}
		at := secretT0.Add(time.Duration(i) * time.Second)
		lines = append(lines, fmt.Sprintf(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","auditID":"cm-%d","stage":"ResponseComplete",`+
			`"requestURI":"/api/v1/namespaces/default/configmaps/cm","verb":%q,"user":{"username":"alice"},"sourceIPs":["127.0.0.1"],`+
			`"objectRef":{"resource":"configmaps","namespace":"default","name":"cm","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":%d},`+
			`"requestObject":%s,"responseObject":%s,"requestReceivedTimestamp":%q,"stageTimestamp":%q}`,
			i, verb, code, body, body, at.Add(-time.Millisecond).Format(time.RFC3339Nano), at.Format(time.RFC3339Nano)))
	}
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	return path
}

// BenchmarkObjectSlider measures what one slider step costs on an object with 2,000 stored
// writes over two windows: listing its history, reconstructing it at its last write (the
// creation snapshot and 1,999 diffs applied) and the diff between its first and last write.
func BenchmarkObjectSlider(b *testing.B) {
	ctx := context.Background()
	const writes = 2000
	st := memory.New(memory.Config{}, 0)
	require.NoError(b, audittest.ReplayFile(ctx, audittest.Config{Deps: aggregator.Deps{Sinks: []aggregator.Sink{st}}}, configMapWrites(b, writes)))
	key := aggregator.ObjectKey{Cluster: "test", Resource: "configmaps", Namespace: "default", Name: "cm"}
	cfg := query.Config{}
	h, err := query.ObjectHistoryBetween(ctx, st, cfg, key, time.Time{}, time.Time{})
	require.NoError(b, err)
	require.Len(b, h.Moments, writes)
	first, last := h.Moments[0].Time, h.Moments[writes-1].Time
	b.Run("history", func(b *testing.B) {
		for b.Loop() {
			if _, err := query.ObjectHistoryBetween(ctx, st, cfg, key, time.Time{}, time.Time{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("at-last", func(b *testing.B) {
		for b.Loop() {
			s, err := query.ObjectAt(ctx, st, cfg, key, last)
			if err != nil || len(s.Gaps) > 0 {
				b.Fatal(err, s.Gaps)
			}
		}
	})
	b.Run("diff-first-last", func(b *testing.B) {
		for b.Loop() {
			if _, err := query.ObjectDiffBetween(ctx, st, cfg, key, first, last); err != nil {
				b.Fatal(err)
			}
		}
	})
}

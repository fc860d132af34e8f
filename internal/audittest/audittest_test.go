package audittest_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/internal/audittest"
)

var rolloutLog = filepath.Join("..", "..", "testdata", "rollout", "audit.jsonl")

func TestReplayFileRollout(t *testing.T) {
	sink := &aggregatortest.RecordingSink{}
	dec := &aggregatortest.RecordingDecorator{}
	require.NoError(t, audittest.ReplayFile(context.Background(), audittest.Config{
		Cluster: "kind",
		Deps:    aggregator.Deps{Sinks: []aggregator.Sink{sink}, Decorators: []aggregator.Decorator{dec}},
	}, rolloutLog))
	var demo bool
	for _, sp := range sink.Spans() {
		assert.Equal(t, "kind", sp.Object.Cluster)
		if sp.Kind == aggregator.KindObject && sp.Object.Resource == "deployments" && sp.Object.Name == "demo" {
			demo = true
		}
	}
	assert.True(t, demo, "the Deployment of the rollout has a trace")
	assert.Len(t, dec.Spans(), sink.Exported(), "every exported span went through the decorators")
}

func TestPipelineHandlesInSteps(t *testing.T) {
	ctx := context.Background()
	events, err := audittest.ReadFile(rolloutLog)
	require.NoError(t, err)
	sink := &aggregatortest.RecordingSink{}
	p, err := audittest.Start(ctx, audittest.Config{Deps: aggregator.Deps{Sinks: []aggregator.Sink{sink}}})
	require.NoError(t, err)
	p.Handle(ctx, events[:10]...)
	n, err := p.HandleFile(ctx, rolloutLog) // the repeats are harmless: same span IDs
	require.NoError(t, err)
	assert.Len(t, events, n)
	require.NoError(t, p.Stop(ctx))
	require.NoError(t, p.Stop(ctx), "Stop twice")
	require.NotEmpty(t, sink.Spans())
	assert.Equal(t, audittest.DefaultCluster, sink.Spans()[0].Object.Cluster)
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		return path
	}
	plain, err := os.ReadFile(rolloutLog)
	require.NoError(t, err)
	gz := filepath.Join(dir, "audit.jsonl.gz")
	f, err := os.Create(gz)
	require.NoError(t, err)
	zw := gzip.NewWriter(f)
	_, err = zw.Write(plain)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	require.NoError(t, f.Close())

	want, err := audittest.ReadFile(rolloutLog)
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		path    string
		events  int
		wantErr string
	}{
		{"plain", rolloutLog, len(want), ""},
		{"gzip", gz, len(want), ""},
		{"blank lines", write("blank.jsonl", "\n"+string(plain[:bytes.IndexByte(plain, '\n')+1])+"\n\n"), 1, ""},
		{"missing", filepath.Join(dir, "missing.jsonl"), 0, "no such file"},
		{"bad line", write("bad.jsonl", "{not json\n"), 0, "bad.jsonl:1"},
		{"empty", write("empty.jsonl", "\n\n"), 0, "no audit events"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events, err := audittest.ReadFile(tc.path)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Len(t, events, tc.events)
		})
	}
}

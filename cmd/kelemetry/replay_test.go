package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var cronjobLog = filepath.Join("..", "..", "testdata", "cronjob", "audit.jsonl")

// replay FILE... ingests into the data folder and exits once everything is stored: serve then
// finds the objects.
func TestReplayCommandIntoDataFolder(t *testing.T) {
	dir := t.TempDir()
	out, stderr, err := runCLI(t, "replay", "--cluster", "test", "--data-dir", dir, rolloutLog, cronjobLog)
	require.NoError(t, err, stderr)
	assert.Regexp(t, `^replayed 26\d events from 2 files into `+regexpQuote(dir)+` in .* 0 bad lines, 0 events dropped`, out)
	assert.Contains(t, stderr, "replay 2/2 "+cronjobLog, "progress lines on a non-terminal")
	assert.Contains(t, stderr, "100%")

	r := start(t, testConfig(t, dir))
	dep := findObject(t, r, "resource=deployments&name=demo")
	assert.Equal(t, "test", dep.Cluster)

	// Traces in memory would be lost at exit: refused.
	_, _, err = runCLI(t, "replay", "--data-dir", "", rolloutLog)
	assert.ErrorContains(t, err, "the store is in memory")
	_, _, err = runCLI(t, "replay", "--data-dir", dir, filepath.Join(dir, "missing.jsonl"))
	assert.ErrorContains(t, err, "missing.jsonl: no such file or directory")
	_, _, err = runCLI(t, "replay")
	assert.ErrorContains(t, err, "requires at least 1 arg")
}

// replay --to posts to a running webhook in batches; lines that are not audit events are counted
// and skipped, not sent.
func TestReplayCommandToWebhook(t *testing.T) {
	r := start(t, testConfig(t, ""))
	broken := filepath.Join(t.TempDir(), "mixed.jsonl")
	rollout, err := os.ReadFile(rolloutLog)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(broken, append([]byte("not json\n{\"kind\":\"Event\",\"auditID\":\n"), rollout...), 0o600))
	out, _, err := runCLI(t, "replay", "--to", r.audit("/audit/prod"), "--batch-events", "50", broken)
	require.NoError(t, err)
	assert.Contains(t, out, "events from 1 files to "+r.audit("/audit/prod"))
	assert.Contains(t, out, "2 bad lines skipped")
	waitReplay(t, r)
	dep := findObject(t, r, "resource=deployments&name=demo&cluster=prod")
	assert.Equal(t, "prod", dep.Cluster)
}

// A batch the webhook sheds with 429 is posted again after Retry-After; one it refuses with 400
// stops the replay with the webhook's reason.
func TestPostBatchRetries(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch calls.Add(1) {
		case 1:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "busy", http.StatusTooManyRequests)
		case 2:
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
		default:
			assert.Equal(t, "Bearer s3cret", r.Header.Get("Authorization"))
			w.WriteHeader(http.StatusOK)
		}
	}))
	defer srv.Close()
	require.NoError(t, postBatch(t.Context(), srv.Client(), srv.URL, "s3cret", []byte(`{}`)))
	assert.Equal(t, int32(3), calls.Load())

	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "decode audit event list: items[0]: bad", http.StatusBadRequest)
	}))
	defer bad.Close()
	err := postBatch(t.Context(), bad.Client(), bad.URL, "", []byte(`{}`))
	assert.EqualError(t, err, "the webhook answered 400 Bad Request: decode audit event list: items[0]: bad")
}

func regexpQuote(s string) string {
	return strings.NewReplacer(`\`, `\\`, `.`, `\.`, `(`, `\(`, `)`, `\)`, `+`, `\+`).Replace(s)
}

package kelemetry_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx/fxtest"

	"github.com/kelemetry/kelemetry"
	"github.com/kelemetry/kelemetry/audit"
	"github.com/kelemetry/kelemetry/audit/tap"
	"github.com/kelemetry/kelemetry/httpserver"
)

// startApp starts an all-in-one on the memory store with cfg's audit settings.
func startApp(t *testing.T, auditCfg audit.Config) (*fxtest.App, *httpserver.Servers) {
	t.Helper()
	cfg := localConfig("")
	cfg.Audit = auditCfg
	return startConfig(t, cfg)
}

// stableTraces waits until the app at apiAddr has caught up (waitCaughtUp) and returns the
// rollout's trees.
func stableTraces(t *testing.T, apiAddr string) []string {
	t.Helper()
	waitCaughtUp(t, apiAddr)
	require.True(t, demoTraceFound(t, apiAddr))
	return rolloutTraces(t, apiAddr)
}

// sameTraces waits until apiAddr serves want, and shows the difference if it never does.
func sameTraces(t *testing.T, apiAddr string, want []string) {
	t.Helper()
	if !assert.Eventually(t, func() bool {
		return demoTraceFound(t, apiAddr) && slices.Equal(rolloutTraces(t, apiAddr), want)
	}, 20*time.Second, 50*time.Millisecond) {
		assert.Equal(t, want, rolloutTraces(t, apiAddr))
	}
}

// A chain of two all-in-ones: A forwards every batch it accepts to B's webhook, and B stores the
// same trees as A.
func TestAuditForwardChain(t *testing.T) {
	b, bServers := startApp(t, audit.Config{})
	defer b.RequireStop()
	a, aServers := startApp(t, audit.Config{Forward: []tap.ForwardConfig{{URL: "http://" + bServers.AuditAddr() + "/audit/{cluster}"}}})
	defer a.RequireStop()

	postRollout(t, aServers.AuditAddr())
	want := stableTraces(t, aServers.APIAddr())
	require.NotEmpty(t, want)
	sameTraces(t, bServers.APIAddr(), want)
}

// An all-in-one dumps what its webhook accepts; a fresh one replaying the dump (--replay) stores
// the same trees.
func TestAuditDumpReplay(t *testing.T) {
	dump := filepath.Join(t.TempDir(), "dump", "audit.jsonl")
	a, aServers := startApp(t, audit.Config{Dump: tap.DumpConfig{Path: dump}})
	postRollout(t, aServers.AuditAddr())
	want := stableTraces(t, aServers.APIAddr())
	a.RequireStop() // flushes the dump
	st, err := os.Stat(dump)
	require.NoError(t, err)
	require.Positive(t, st.Size())

	c, cServers := startApp(t, audit.Config{Replay: []string{dump}})
	defer c.RequireStop()
	sameTraces(t, cServers.APIAddr(), want)
}

// The dump and forward YAML of docs/ingest/dump-and-forward.md loads into the audit configuration.
func TestAuditDumpForwardConfigLoads(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`audit:
  dump: {path: /var/lib/kelemetry/audit-dump.jsonl, maxBytes: 104857600, maxFiles: 5}
  forward:
    - url: https://kelemetry-b:8080/audit/{cluster}
      caFile: /etc/kelemetry/b-ca.pem
      bearerTokenFile: /etc/kelemetry/b-token
      maxBufferBytes: 1048576
      timeout: 5s
`), 0o600))
	cfg, err := kelemetry.LoadConfig(file)
	require.NoError(t, err)
	assert.Equal(t, tap.DumpConfig{Path: "/var/lib/kelemetry/audit-dump.jsonl", MaxBytes: 100 << 20, MaxFiles: 5}, cfg.Audit.Dump)
	assert.Equal(t, []tap.ForwardConfig{{URL: "https://kelemetry-b:8080/audit/{cluster}", CAFile: "/etc/kelemetry/b-ca.pem",
		BearerTokenFile: "/etc/kelemetry/b-token", MaxBufferBytes: 1 << 20, Timeout: 5 * time.Second}}, cfg.Audit.Forward)
}

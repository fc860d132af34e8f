package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/internal/version"
)

// runCLI runs the command with args and returns what it printed on stdout and stderr.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = run(context.Background(), args, &out, &errOut)
	return out.String(), errOut.String(), err
}

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kelemetry.yaml")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// validate prints every problem of a broken configuration on its own line with its file and
// line, and fails; a valid one prints OK.
func TestValidateCommand(t *testing.T) {
	path := writeConfig(t, "windwo: 30m\nstore:\n  maxBytes: 10Gi\n  maxAge: forever\naggregator:\n  window: 1h\naudit:\n  queue: {capacity: lots}\n")
	out, _, err := runCLI(t, "validate", "--config", path)
	require.ErrorIs(t, err, errReported)
	assert.Equal(t, []string{
		path + ":1: windwo: unknown key; did you mean window?",
		path + `:4: store.maxAge: "forever" is not a duration: write a number with a unit, such as 30s, 5m or 168h`,
		path + ":6: aggregator.window: this key moved: write it as window (the top-level key: one window for every part)",
		path + `:8: audit.queue.capacity: "lots" is not a whole number`,
	}, strings.Split(strings.TrimSpace(out), "\n"))

	// Values the parts refuse, one a line too; and a replay file that does not exist.
	path = writeConfig(t, "store:\n  maxBytes: 1\nrole: both\n")
	out, _, err = runCLI(t, "validate", "--config", path, "--replay", "no-such.jsonl")
	require.ErrorIs(t, err, errReported)
	assert.Contains(t, out, "store: maxBytes 1 is below the minimum of 67108864 (64 MiB)\n")
	assert.Contains(t, out, `role "both": want "all", "ingest" or "query"`)

	path = writeConfig(t, "store:\n  maxBytes: 20Gi\nwindow: 1h\n")
	out, _, err = runCLI(t, "validate", "--config", path, "--data-dir", t.TempDir())
	require.NoError(t, err)
	assert.Equal(t, "configuration OK\n", out)

	out, _, err = runCLI(t, "validate", "--data-dir", "", "--replay", "no-such.jsonl")
	require.ErrorIs(t, err, errReported)
	assert.Equal(t, "--replay no-such.jsonl: no such file or directory\n", out)
}

// print-config prints the effective configuration: defaults, the file, the flags and --set, in
// that order, secrets hidden.
func TestPrintConfigCommand(t *testing.T) {
	path := writeConfig(t, "window: 2h\ncluster: from-file\ninformerDiff:\n  cache:\n    etcd:\n      password: hunter2\n")
	out, _, err := runCLI(t, "print-config", "--config", path, "--cluster", "from-flag", "--set", "store.maxBytes=12Gi", "--set", "cluster=from-set")
	require.NoError(t, err)
	assert.Contains(t, out, "window: 2h0m0s\n")
	assert.Contains(t, out, "cluster: from-set\n", "--set is applied last")
	assert.Contains(t, out, "maxBytes: 12884901888\n")
	assert.Contains(t, out, "auditAddr: 127.0.0.1:8080\n", "defaults are filled in")
	assert.NotContains(t, out, "hunter2")
	assert.Contains(t, out, "password: <hidden>")

	// What it prints is a configuration file that reads back as valid.
	out, _, err = runCLI(t, "print-config", "--data-dir", t.TempDir(), "--set", "window=2h")
	require.NoError(t, err)
	back := writeConfig(t, out)
	out, _, err = runCLI(t, "validate", "--config", back)
	require.NoError(t, err, out)
	assert.Equal(t, "configuration OK\n", out)

	// It shows a configuration whose files exist only where it will run (a pod's mounts).
	path = writeConfig(t, "httpTLS: {certFile: /etc/kelemetry/tls/tls.crt, keyFile: /etc/kelemetry/tls/tls.key}\n")
	out, _, err = runCLI(t, "print-config", "--config", path)
	require.NoError(t, err)
	assert.Contains(t, out, "certFile: /etc/kelemetry/tls/tls.crt")

	_, _, err = runCLI(t, "print-config", "--set", "store.maxBites=1Gi")
	assert.EqualError(t, err, "--set store.maxBites=1Gi: store.maxBites: unknown key; did you mean maxBytes?")
}

// An unknown flag gets one line naming the closest flag, whichever command it is given to; the
// single-dash forms of earlier builds still work.
func TestFlagErrors(t *testing.T) {
	_, stderr, err := runCLI(t, "--windwo", "1h")
	assert.EqualError(t, err, "unknown flag --windwo; did you mean --window? (kelemetry --help lists the flags)")
	assert.Empty(t, stderr, "no usage dump")
	_, _, err = runCLI(t, "validate", "--data-dri", "x")
	assert.EqualError(t, err, "unknown flag --data-dri; did you mean --data-dir? (kelemetry --help lists the flags)")
	_, _, err = runCLI(t, "--zzzzzzzz")
	assert.EqualError(t, err, "unknown flag --zzzzzzzz (kelemetry --help lists the flags)")
	_, _, err = runCLI(t, "serve", "extra")
	assert.ErrorContains(t, err, `unknown command "extra"`)

	out, _, err := runCLI(t, "print-config", "-cluster", "old-style", "-window=3h")
	require.NoError(t, err)
	assert.Contains(t, out, "cluster: old-style\n")
	assert.Contains(t, out, "window: 3h0m0s\n")
	assert.Equal(t, []string{"-a", "--cluster", "x", "--", "-keep"}, normalizeArgs([]string{"-a", "-cluster", "x", "--", "-keep"}))
}

// --help lists the commands and the flags by topic.
func TestHelp(t *testing.T) {
	out, _, err := runCLI(t, "--help")
	require.NoError(t, err)
	var order []int
	for _, heading := range []string{"Commands:", "  serve ", "  validate ", "General flags:", "Listeners flags:", "Security flags:", "Audit flags:", "Store flags:", "Linkers flags:", "Telemetry flags:"} {
		i := strings.Index(out, heading)
		require.GreaterOrEqual(t, i, 0, "%q in the help", heading)
		order = append(order, i)
	}
	assert.IsIncreasing(t, order)
	assert.NotContains(t, out, "Other flags:", "every flag has a topic")
	assert.Contains(t, out, "--set stringArray")
}

func TestVersionCommand(t *testing.T) {
	out, _, err := runCLI(t, "version")
	require.NoError(t, err)
	assert.Equal(t, version.Get().String()+"\n", out)
}

// serve stops at once on a replay file that does not exist, and a start-up error is one line:
// the sentence that explains it, without fx's dependency chain.
func TestServeStartErrors(t *testing.T) {
	_, _, err := runCLI(t, "--data-dir", "", "--replay", filepath.Join(t.TempDir(), "gone.jsonl"))
	assert.ErrorContains(t, err, "gone.jsonl: no such file or directory")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	_, _, err = runCLI(t, "--data-dir", "", "--audit-addr", "127.0.0.1:0", "--http-addr", ln.Addr().String(), "--log-level", "error")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "\n")
	assert.Contains(t, err.Error(), "address already in use (another process listens there")

	// A folder another process holds: one line, not the chain of the parts that needed the store.
	dir := t.TempDir()
	r := start(t, testConfig(t, dir))
	defer r.stop(t)
	_, _, err = runCLI(t, "--data-dir", dir, "--audit-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--log-level", "error")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "could not build")
	assert.True(t, strings.HasPrefix(err.Error(), "open store "), err.Error())
}

// freshFamilies are the kelemetry_* families a fresh all-in-one (no cluster, no credentials, no
// kelemetrix metrics, no link rules) exposes before any traffic: every counter of the modules
// that run (the audit webhook, queue and consumer, the aggregator and its linkers, kelemetrix, the
// store, the query APIs and the listeners) at 0 from the start, and the gauges. The counters of
// the modules that need a cluster (informer diffs, the Event source, the object cache and
// discovery), of link rules (by rule, once one is put), of kelemetrix's series overflow (by
// configured metric) and of the authenticators start at 0 when those are configured.
var freshFamilies = []string{
	"kelemetry_aggregator_events_total",
	"kelemetry_aggregator_export_errors_total",
	"kelemetry_aggregator_link_errors_total",
	"kelemetry_aggregator_link_export_retries_total",
	"kelemetry_aggregator_link_jobs_total",
	"kelemetry_aggregator_link_queue_capacity",
	"kelemetry_aggregator_link_queue_depth",
	"kelemetry_aggregator_links_total",
	"kelemetry_aggregator_spancache_evictions_total",
	"kelemetry_aggregator_spans_total",
	"kelemetry_audit_consumer_collection_deletions_dropped_total",
	"kelemetry_audit_consumer_dedup_evictions_total",
	"kelemetry_audit_consumer_events_total",
	"kelemetry_audit_consumer_informer_claims_dropped_total",
	"kelemetry_audit_consumer_informer_diffs_total",
	"kelemetry_audit_consumer_send_retries_total",
	"kelemetry_audit_queue_accepted_total",
	"kelemetry_audit_queue_bytes",
	"kelemetry_audit_queue_corrupt_records_total",
	"kelemetry_audit_queue_deleted_segments",
	"kelemetry_audit_queue_depth",
	"kelemetry_audit_queue_disk_bytes",
	"kelemetry_audit_queue_disk_rejected_total",
	"kelemetry_audit_queue_dropped_total",
	"kelemetry_audit_queue_fsyncs",
	"kelemetry_audit_queue_log_failures",
	"kelemetry_audit_queue_log_recoveries",
	"kelemetry_audit_queue_max_bytes",
	"kelemetry_audit_queue_max_disk_bytes",
	"kelemetry_audit_queue_rejected_total",
	"kelemetry_audit_queue_replayed_total",
	"kelemetry_audit_queue_sink_sync_failures_total",
	"kelemetry_audit_webhook_dropped_events_total",
	"kelemetry_audit_webhook_events_total",
	"kelemetry_audit_webhook_rejected_total",
	"kelemetry_audit_webhook_repeat_body_evictions_total",
	"kelemetry_audit_webhook_repeat_evictions_total",
	"kelemetry_audit_webhook_repeated_events_total",
	"kelemetry_audit_webhook_requests_total",
	"kelemetry_diff_stream_evictions_total",
	"kelemetry_diff_stream_writes_total",
	"kelemetry_frontend_changes_follow_cutoff_total",
	"kelemetry_frontend_changes_followers",
	"kelemetry_frontend_queries_memory_bytes",
	"kelemetry_frontend_queries_rejected_total",
	"kelemetry_frontend_queries_truncated_total",
	"kelemetry_kelemetrix_dropped_events_total",
	"kelemetry_kelemetrix_events_total",
	"kelemetry_linker_annotation_invalid_total",
	"kelemetry_linker_annotation_lookups_total",
	"kelemetry_linker_owner_lookups_total",
	"kelemetry_linkrule_no_body_total",
	"kelemetry_listener_connections",
	"kelemetry_listener_refused_connections_total",
	"kelemetry_listener_tls_handshake_errors_total",
	"kelemetry_ready",
	"kelemetry_store_indexcache_evictions_total",
	"kelemetry_store_retention_deleted_spans_total",
	"kelemetry_store_retention_deleted_windows_total",
	"kelemetry_store_retention_over_limit_total",
	"kelemetry_store_size_bytes",
	"kelemetry_store_spans_written_total",
	"kelemetry_store_write_errors_total",
}

// Every counter is exported at 0 from the start, each known label value included, so that an
// increase() over it sees the first occurrence; the Prometheus names are those of
// docs/reference/metrics.md. A family that disappears (or a new one) fails the comparison.
func TestCountersExportedFromStart(t *testing.T) {
	r := start(t, testConfig(t, t.TempDir()))
	resp, err := http.Get(r.api("/metrics"))
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var families []string
	for line := range strings.Lines(string(body)) {
		if f, ok := strings.CutPrefix(line, "# TYPE kelemetry_"); ok {
			name, _, _ := strings.Cut(f, " ")
			families = append(families, "kelemetry_"+name)
		}
	}
	assert.Len(t, families, 63)
	assert.ElementsMatch(t, freshFamilies, families)
	for _, series := range []string{
		`kelemetry_audit_webhook_rejected_total{reason="queue_full"} 0`,
		`kelemetry_audit_webhook_rejected_total{reason="unavailable"} 0`,
		`kelemetry_audit_webhook_events_total 0`,
		`kelemetry_audit_queue_rejected_total{reason="full"} 0`,
		`kelemetry_audit_queue_dropped_total{reason="stopped"} 0`,
		`kelemetry_aggregator_events_total{result="ok"} 0`,
		`kelemetry_aggregator_links_total{linker="owner"} 0`,
		`kelemetry_aggregator_link_errors_total{linker="annotation"} 0`,
		`kelemetry_audit_consumer_informer_diffs_total{result="unavailable"} 0`,
		`kelemetry_audit_queue_disk_rejected_total 0`,
		`kelemetry_frontend_queries_rejected_total{api="ui",reason="memory"} 0`,
		`kelemetry_linker_owner_lookups_total{source="getter"} 0`,
		`kelemetry_listener_refused_connections_total{listener="api"} 0`,
		`kelemetry_store_retention_deleted_windows_total{reason="size"} 0`,
	} {
		assert.True(t, strings.Contains(string(body), series+"\n"), "/metrics has no %s", series)
	}
}

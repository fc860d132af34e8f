package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/goleak"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/httpserver"
	"github.com/kelemetry/kelemetry/kelemetrix"
	"github.com/kelemetry/kelemetry/telemetry"

	"github.com/kelemetry/kelemetry/internal/kelemetrixtest"
)

// TestMain fails the package's tests when a goroutine outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var (
	defaultConfig = filepath.Join("..", "..", "deploy", "kelemetrix.yaml")
	rolloutDir    = filepath.Join("..", "..", "testdata", "rollout")
)

func TestParseFlags(t *testing.T) {
	_, err := parseFlags(nil, io.Discard)
	assert.ErrorContains(t, err, "--kelemetrix-config is required")
	c, err := parseFlags([]string{"--kelemetrix-config", defaultConfig, "--replay", "a.log", "--follow", "b.log", "--cluster", "c1"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []string{"a.log"}, c.replay)
	assert.Equal(t, []string{"b.log"}, c.follow)
	assert.Equal(t, "c1", c.cluster)
	assert.NotEmpty(t, c.metrics.Metrics)
	bad := filepath.Join(t.TempDir(), "k.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("metrics:\n- name: a\n  kind: counter\n  quantity: requestCount\n  labels: [nope]\n"), 0o600))
	_, err = parseFlags([]string{"--kelemetrix-config", bad}, io.Discard)
	assert.ErrorContains(t, err, "line 5: kelemetrix metrics[0]: label \"nope\" is no tag")
}

func TestValidate(t *testing.T) {
	c, err := parseFlags([]string{"--kelemetrix-config", defaultConfig}, io.Discard)
	require.NoError(t, err)
	require.NoError(t, fx.ValidateApp(options(c, slog.Default())))
}

// TestWebhookAndReplayToMetrics: the binary turns a replayed audit log and the same events
// posted to its webhook into /metrics counts (twice the log's), without any store.
func TestWebhookAndReplayToMetrics(t *testing.T) {
	c, err := parseFlags([]string{"--kelemetrix-config", defaultConfig, "--replay", filepath.Join(rolloutDir, "audit.jsonl"),
		"--audit-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--cluster", "demo"}, io.Discard)
	require.NoError(t, err)
	var servers *httpserver.Servers
	app := fxtest.New(t, options(c, slog.New(slog.DiscardHandler)), fx.Populate(&servers))
	app.RequireStart()
	defer app.RequireStop()

	f, err := os.Open(filepath.Join(rolloutDir, "webhook-batches.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		resp, err := http.Post("http://"+servers.AuditAddr()+"/audit/demo", "application/json", bytes.NewReader(sc.Bytes()))
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	require.NoError(t, sc.Err())

	// The counts of the log by user and verb: each event is posted once and replayed once.
	want := map[string]int{}
	logFile, err := os.ReadFile(filepath.Join(rolloutDir, "audit.jsonl"))
	require.NoError(t, err)
	userRE := regexp.MustCompile(`"verb":"([a-z]+)","user":\{"username":"([^"]*)"`)
	for _, line := range bytes.Split(logFile, []byte("\n")) {
		if m := userRE.FindSubmatch(line); m != nil {
			want[string(m[2])+" "+string(m[1])] += 2
		}
	}
	require.NotEmpty(t, want)
	var got map[string]int
	require.Eventually(t, func() bool {
		got = kelemetrixtest.RequestsByUser(t, "http://"+servers.APIAddr()+"/metrics")
		return assert.ObjectsAreEqual(want, got)
	}, 10*time.Second, 50*time.Millisecond)
	assert.Equal(t, want, got)
}

// TestMaxSeriesAboveSDKDefault: the binary's provider keeps a metric's maxSeries series when that
// is above the SDK's default cardinality limit (2000): no otel_metric_overflow series.
func TestMaxSeriesAboveSDKDefault(t *testing.T) {
	t.Setenv(telemetry.CardinalityEnv, "")
	file := filepath.Join(t.TempDir(), "k.yaml")
	require.NoError(t, os.WriteFile(file, []byte("maxSeries: 2500\nmetrics:\n- name: by_user\n  kind: counter\n  quantity: requestCount\n  labels: [user]\n"), 0o600))
	c, err := parseFlags([]string{"--kelemetrix-config", file, "--audit-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"}, io.Discard)
	require.NoError(t, err)
	var servers *httpserver.Servers
	var proc *kelemetrix.Processor
	app := fxtest.New(t, options(c, slog.New(slog.DiscardHandler)), fx.Populate(&servers, &proc))
	app.RequireStart()
	defer app.RequireStop()

	var evs []*auditv1.Event
	for i := range 2200 {
		evs = append(evs, &auditv1.Event{AuditID: "a", Stage: "ResponseComplete", Verb: "get",
			User: auditv1.UserInfo{Username: fmt.Sprintf("u%d", i)}, ResponseStatus: &auditv1.Status{Code: 200}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, proc.EnqueueWait(ctx, "c", evs))
	require.NoError(t, proc.Flush(ctx))
	resp, err := http.Get("http://" + servers.APIAddr() + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.False(t, bytes.Contains(body, []byte("otel_metric_overflow")), "the SDK folded series into otel_metric_overflow")
	assert.Len(t, regexp.MustCompile(`(?m)^by_user_total\{user="u\d+"\} 1$`).FindAllIndex(body, -1), 2200)
}

//go:build e2e

package kelemetry_test

// The managed-cluster path through a real OpenTelemetry Collector (built by the Collector builder
// from e2e/tools/otelcol, cached as otelcol-kelemetry by e2e/cmd/buildbins): its filelog and
// Kafka receivers read the recorded rollout's audit log and its OTLP exporters send it to
// Kelemetry's OTLP logs receiver. scripts/e2e.sh runs these with `go test -tags e2e -run
// '^TestCollector' .`.

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"go.yaml.in/yaml/v3"

	"github.com/kelemetry/kelemetry"
	"github.com/kelemetry/kelemetry/audit/cloudlog"
	"github.com/kelemetry/kelemetry/httpserver"
	"github.com/kelemetry/kelemetry/internal/httpservertest"
	"github.com/kelemetry/kelemetry/internal/natstest"
	apiquery "github.com/kelemetry/kelemetry/internal/query"
)

// e2eCacheBin returns the binary name from the end-to-end cache folder ($KELEMETRY_E2E_CACHE or
// ~/.cache/kelemetry-e2e/bin), or env's value when set; it skips the test when the binary is
// absent, unless KELEMETRY_E2E_REQUIRE=1.
func e2eCacheBin(t *testing.T, env, name string) string {
	t.Helper()
	bin := os.Getenv(env)
	if bin == "" {
		dir := os.Getenv("KELEMETRY_E2E_CACHE")
		if dir == "" {
			home, _ := os.UserHomeDir()
			dir = filepath.Join(home, ".cache", "kelemetry-e2e", "bin")
		}
		bin = filepath.Join(dir, name)
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("KELEMETRY_E2E_REQUIRE") == "1" {
			t.Fatalf("no %s: %v", name, err)
		}
		t.Skipf("no %s (%v): run ./scripts/e2e.sh once", name, err)
	}
	return bin
}

// proc is a process the test started and stops when it ends.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startProc(t *testing.T, name, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(bin, args...), log: filepath.Join(t.TempDir(), name+".log"), done: make(chan struct{})}
	logf, err := os.Create(p.log)
	require.NoError(t, err)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	require.NoError(t, p.cmd.Start())
	go func() {
		_ = p.cmd.Wait()
		_ = logf.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.signal(t, syscall.SIGTERM)
		if t.Failed() {
			out, _ := os.ReadFile(p.log)
			t.Logf("%s's log:\n%s", name, tail(out, 60))
		}
	})
	return p
}

// signal sends sig and waits until the process is gone (SIGKILL after 30 seconds).
func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Errorf("%s does not stop on %v", p.name, sig)
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func tail(b []byte, lines int) string {
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

// startCollector runs the Collector on the configuration cfg (YAML) until the test ends.
func startCollector(t *testing.T, cfg string) *proc {
	t.Helper()
	bin := e2eCacheBin(t, "KELEMETRY_OTELCOL_BIN", "otelcol-kelemetry")
	path := filepath.Join(t.TempDir(), "collector.yaml")
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
	out, err := exec.Command(bin, "validate", "--config=file:"+path).CombinedOutput()
	require.NoError(t, err, "the Collector refuses the configuration: %s", out)
	return startProc(t, "collector", bin, "--config=file:"+path)
}

// collectorExporter is the exporter's settings that keep the audit log's order (one sender) and
// retry until Kelemetry takes the records, with the queue in the file storage when storage is set.
func collectorExporter(storage string) string {
	s := `
    retry_on_failure: {enabled: true, initial_interval: 100ms, max_interval: 500ms, max_elapsed_time: 0s}
    sending_queue:
      enabled: true
      num_consumers: 1
      batch: {flush_timeout: 100ms, sizer: items, min_size: 1, max_size: 40}`
	if storage != "" {
		s += "\n      storage: " + storage
	}
	return s
}

// rolloutLines are the recorded rollout's audit log, one event a line.
func rolloutLines(t *testing.T) [][]byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "rollout", "audit.jsonl"))
	require.NoError(t, err)
	var out [][]byte
	for line := range bytes.Lines(data) {
		if len(bytes.TrimSpace(line)) > 0 {
			out = append(out, line)
		}
	}
	require.NotEmpty(t, out)
	return out
}

// webhookTree is the rollout's tree as the webhook path builds it.
func webhookTree(t *testing.T) string {
	t.Helper()
	viaWebhook := startInMemory(t, func(*kelemetry.Config) {})
	postRollout(t, viaWebhook.AuditAddr())
	waitCaughtUp(t, viaWebhook.APIAddr())
	want := fullTree(t, viaWebhook.APIAddr())
	require.Greater(t, strings.Count(want, `"spanID"`), 10, "the rollout's tree")
	return want
}

// caughtUp reports whether the app at apiAddr has handled all it took.
func caughtUp(t *testing.T, apiAddr string) bool {
	h, ok := readHealth(t, apiAddr)
	return ok && h.Replay.Done && h.QueueDepth == 0 && h.LinkJobs == 0
}

// requireTree waits until the app at apiAddr draws want (after norm, when set, on both).
func requireTree(t *testing.T, apiAddr, want string, within time.Duration, norm func(*testing.T, string) string) {
	t.Helper()
	if norm == nil {
		norm = func(_ *testing.T, s string) string { return s }
	}
	want = norm(t, want)
	var got string
	ok := assert.Eventually(t, func() bool {
		if !caughtUp(t, apiAddr) || !demoTraceFound(t, apiAddr) {
			return false
		}
		got = norm(t, fullTree(t, apiAddr))
		return got == want
	}, within, 200*time.Millisecond)
	if !ok {
		// The trees are long: keep them for a diff.
		dir := os.Getenv("KELEMETRY_E2E_KEEP")
		if dir == "" {
			dir = t.TempDir()
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, "want.json"), []byte(want), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "got.json"), []byte(got), 0o644))
		t.Fatalf("the tree through the Collector differs from the webhook's (%d and %d bytes; diff %s/want.json %s/got.json)", len(want), len(got), dir, dir)
	}
}

func appendFile(t *testing.T, path string, lines [][]byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	_, err = f.Write(bytes.Join(lines, nil))
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// The audit log file read by the Collector's filelog receiver and sent over OTLP/gRPC gives the
// webhook's tree; the resource attribute k8s.cluster.name names the cluster.
func TestCollectorFilelogEqualsWebhook(t *testing.T) {
	want := webhookTree(t)
	viaCollector := startInMemory(t, func(c *kelemetry.Config) {
		c.Cluster = "other"
		c.OTLPAddr = "127.0.0.1:0"
		c.Audit.OTLPLogs.Enabled = true
	})
	logFile := filepath.Join(t.TempDir(), "audit.log")
	appendFile(t, logFile, rolloutLines(t))
	startCollector(t, fmt.Sprintf(`
receivers:
  filelog:
    include: [%q]
    start_at: beginning
    max_log_size: 16MiB
    resource: {k8s.cluster.name: demo}
exporters:
  otlp:
    endpoint: %q
    tls: {insecure: true}%s
service:
  telemetry: {metrics: {level: none}}
  pipelines:
    logs: {receivers: [filelog], exporters: [otlp]}
`, logFile, viaCollector.OTLPAddr(), collectorExporter("")))
	requireTree(t, viaCollector.APIAddr(), want, 60*time.Second, nil)
}

// The audit log on a Kafka topic (kfake: the Kafka protocol, in process), read by the
// Collector's Kafka receiver and sent over OTLP/HTTP, gives the webhook's tree.
func TestCollectorKafkaEqualsWebhook(t *testing.T) {
	want := webhookTree(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "k8s-audit"))
	require.NoError(t, err)
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("k8s-audit"))
	require.NoError(t, err)
	for _, line := range rolloutLines(t) {
		require.NoError(t, cl.ProduceSync(t.Context(), &kgo.Record{Value: bytes.TrimSpace(line)}).FirstErr())
	}
	cl.Close()

	viaCollector := startInMemory(t, func(c *kelemetry.Config) {
		c.OTLPAddr = "127.0.0.1:0"
		c.Audit.OTLPLogs.Enabled = true
	})
	startCollector(t, fmt.Sprintf(`
receivers:
  kafka:
    brokers: [%q]
    logs: {topics: [k8s-audit], encoding: text}
    group_id: kelemetry-collector
    initial_offset: earliest
exporters:
  otlphttp:
    endpoint: %q%s
service:
  telemetry: {metrics: {level: none}}
  pipelines:
    logs: {receivers: [kafka], exporters: [otlphttp]}
`, c.ListenAddrs()[0], "http://"+viaCollector.OTLPAddr(), collectorExporter("")))
	requireTree(t, viaCollector.APIAddr(), want, 60*time.Second, nil)
}

// Nothing is lost when Kelemetry is killed (SIGKILL) after it acknowledged a part of the log,
// while more is written, and when its durable queue's log (192 KiB here, for 700 KB of audit
// log) is full (it answers RESOURCE_EXHAUSTED and the Collector retries): the all-in-one binary with its durable
// queue and store on disk, the Collector with its sending queue and file offsets in its file
// storage.
func TestCollectorKelemetryRestartAndOverload(t *testing.T) {
	want := webhookTree(t)
	bin := e2eCacheBin(t, "KELEMETRY_ALLINONE_BIN", "kelemetry-allinone")
	port := func() string { return "127.0.0.1:" + strconv.Itoa(natstest.FreePort(t)) }
	auditAddr, apiAddr, otlpAddr := port(), port(), port()
	dataDir := t.TempDir()
	kelemetryCfg := filepath.Join(t.TempDir(), "kelemetry.yaml")
	require.NoError(t, os.WriteFile(kelemetryCfg, []byte(fmt.Sprintf(`
cluster: demo
auditAddr: %q
httpAddr: %q
otlpAddr: %q
dataDir: %q
audit:
  otlpLogs: {enabled: true}
  queue: {maxDiskBytes: 196608, segmentBytes: 65536}
# The fixture was recorded on 2026-11-29: kept past the default 7 days, which the store's
# retention would apply when the restarted process starts.
store: {maxAge: 876000h}
`, auditAddr, apiAddr, otlpAddr, dataDir)), 0o600))
	startKelemetry := func() *proc {
		p := startProc(t, "kelemetry", bin, "--config="+kelemetryCfg, "--log-level=warn")
		require.Eventually(t, func() bool {
			resp, err := http.Get("http://" + apiAddr + "/healthz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return true
		}, 30*time.Second, 50*time.Millisecond, "Kelemetry does not come up")
		return p
	}
	k := startKelemetry()

	lines := rolloutLines(t)
	third := len(lines) / 3
	logFile := filepath.Join(t.TempDir(), "audit.log")
	appendFile(t, logFile, lines[:third])
	storage := t.TempDir()
	startCollector(t, fmt.Sprintf(`
receivers:
  filelog:
    include: [%q]
    start_at: beginning
    storage: file_storage
exporters:
  otlp:
    endpoint: %q
    tls: {insecure: true}%s
extensions:
  file_storage: {directory: %q}
service:
  telemetry: {metrics: {level: none}}
  extensions: [file_storage]
  pipelines:
    logs: {receivers: [filelog], exporters: [otlp]}
`, logFile, otlpAddr, collectorExporter("file_storage"), storage))

	// The first third acknowledged (events counted as received), then SIGKILL.
	require.Eventually(t, func() bool { return metricSum(t, apiAddr, "kelemetry_audit_otlp_events_total") >= float64(third) },
		60*time.Second, 50*time.Millisecond, "the first third through the Collector")
	k.signal(t, syscall.SIGKILL)
	// The second third is written while Kelemetry is down: the Collector reads it and retries.
	appendFile(t, logFile, lines[third:2*third])
	time.Sleep(2 * time.Second)
	k = startKelemetry()
	appendFile(t, logFile, lines[2*third:])
	// Every span and every event, each once; the diffs of the first writes after the restart
	// differ (the last versions are kept in memory: "no previous version seen").
	requireTree(t, apiAddr, want, 90*time.Second, withoutDiffs)
	refusedFull := metricSum(t, apiAddr, `kelemetry_audit_otlp_refused_total{reason="full"}`)
	t.Logf("after the restart: %v requests refused as full and retried by the Collector", refusedFull)
	assert.Positive(t, refusedFull, "a 192 KiB queue log refuses part of 470 KB sent at once: the overload path ran")
	k.signal(t, syscall.SIGTERM)
}

// Each Collector configuration of deploy/collector/ runs as written, to a Kelemetry that serves
// TLS and wants the bearer token, but for its cloud receiver (and that receiver's extensions),
// which cannot run without the cloud: a file of that cloud's records takes its place. The
// exporter (TLS, the token header, the one-sender queue on file storage, the batch), the
// processors and the other extensions are the file's own; the records' events must all arrive,
// none rejected.
func TestCollectorExampleConfigs(t *testing.T) {
	for _, tc := range []struct {
		cloud string
		// cloudReceiver is replaced by a filelog receiver reading fixtures (one record a line);
		// cloudExtensions are dropped with it.
		cloudReceiver   string
		cloudExtensions []string
		fixtures        []string
		events          int
	}{
		{"eks", "awscloudwatch", nil, []string{"eks-message.json"}, 1},
		{"gke", "googlecloudpubsub", []string{"text_encoding"},
			[]string{"gke-pod-create.json", "gke-status-conflict.json", "gke-binding-create.json", "gke-cluster-api.json"}, 3},
		{"aks", "azureeventhub", []string{"azureauth"}, []string{"aks-eventhubs.json"}, 2},
	} {
		t.Run(tc.cloud, func(t *testing.T) {
			certs, err := httpservertest.WriteFiles(t.TempDir(), "kelemetry", "collector")
			require.NoError(t, err)
			tokenFile := filepath.Join(t.TempDir(), "tokens")
			require.NoError(t, os.WriteFile(tokenFile, []byte("s3cret-token\n"), 0o600))
			k := startInMemory(t, func(c *kelemetry.Config) {
				c.OTLPAddr = "127.0.0.1:0"
				c.OTLPTLS = httpserver.TLSConfig{CertFile: certs.ServerCert, KeyFile: certs.ServerKey}
				c.OTLPAuth = httpserver.AuditAuthConfig{TokenFiles: []string{tokenFile}}
				c.Audit.OTLPLogs.Enabled = true
				c.Audit.OTLPLogs.Format = cloudlog.Format(tc.cloud)
			})

			var records [][]byte
			for _, f := range tc.fixtures {
				raw, err := os.ReadFile(filepath.Join("audit", "cloudlog", "testdata", f))
				require.NoError(t, err)
				var compact bytes.Buffer
				require.NoError(t, json.Compact(&compact, raw))
				records = append(records, append(compact.Bytes(), '\n'))
			}
			input := filepath.Join(t.TempDir(), tc.cloud+".jsonl")
			appendFile(t, input, records)

			data, err := os.ReadFile(filepath.Join("deploy", "collector", tc.cloud+".yaml"))
			require.NoError(t, err)
			var values struct {
				Config map[string]any `yaml:"config"`
			}
			require.NoError(t, yaml.Unmarshal(data, &values))
			cfg := values.Config
			section := func(name string) map[string]any {
				m, _ := cfg[name].(map[string]any)
				if m == nil {
					m = map[string]any{}
					cfg[name] = m
				}
				return m
			}
			// The chart's defaults the file removes (null) or relies on (health_check).
			dropNulls(cfg)
			receivers := section("receivers")
			require.Contains(t, receivers, tc.cloudReceiver, "the cloud's receiver")
			delete(receivers, tc.cloudReceiver)
			receivers["filelog/"+tc.cloud] = map[string]any{"include": []any{input}, "start_at": "beginning", "max_log_size": "16MiB"}
			exts := section("extensions")
			for _, e := range tc.cloudExtensions {
				require.Contains(t, exts, e)
				delete(exts, e)
			}
			exts["health_check"] = map[string]any{"endpoint": "127.0.0.1:" + strconv.Itoa(natstest.FreePort(t))}
			if fs, ok := exts["file_storage"].(map[string]any); ok {
				fs["directory"] = t.TempDir()
			}
			svc := section("service")
			svc["extensions"] = slices.DeleteFunc(svc["extensions"].([]any), func(e any) bool { return slices.Contains(tc.cloudExtensions, e.(string)) })
			svc["telemetry"] = map[string]any{"metrics": map[string]any{"level": "none"}}
			logsPipeline := svc["pipelines"].(map[string]any)["logs"].(map[string]any)
			require.Equal(t, []any{tc.cloudReceiver}, logsPipeline["receivers"])
			logsPipeline["receivers"] = []any{"filelog/" + tc.cloud}
			exp := section("exporters")["otlp/kelemetry"].(map[string]any)
			_, port, err := net.SplitHostPort(k.OTLPAddr())
			require.NoError(t, err)
			exp["endpoint"] = "localhost:" + port // the test certificate's name
			exp["tls"].(map[string]any)["ca_file"] = certs.CA
			out, err := yaml.Marshal(cfg)
			require.NoError(t, err)

			t.Setenv("KELEMETRY_TOKEN", "s3cret-token")
			startCollector(t, string(out))
			require.Eventually(t, func() bool {
				return metricSum(t, k.APIAddr(), "kelemetry_audit_otlp_events_total") >= float64(tc.events)
			}, 60*time.Second, 100*time.Millisecond, "the records' audit events through the Collector")
			time.Sleep(500 * time.Millisecond)
			assert.Equal(t, float64(tc.events), metricSum(t, k.APIAddr(), "kelemetry_audit_otlp_events_total"))
			assert.Zero(t, metricSum(t, k.APIAddr(), `kelemetry_audit_otlp_records_total{result="rejected"}`))
			assert.Zero(t, metricSum(t, k.APIAddr(), "kelemetry_http_auth_rejected_total"), "the Collector's token was accepted")
			// Not vacuous: the receiver refuses a sender without the token.
			pool := x509.NewCertPool()
			caPEM, err := os.ReadFile(certs.CA)
			require.NoError(t, err)
			require.True(t, pool.AppendCertsFromPEM(caPEM))
			client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
			resp, err := client.Post("https://localhost:"+port+"/v1/logs", "application/json", strings.NewReader(`{"resourceLogs":[]}`))
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		})
	}
}

// dropNulls deletes the keys whose value is null, at every depth: the chart's way of removing a
// default.
func dropNulls(m map[string]any) {
	for k, v := range m {
		switch v := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			dropNulls(v)
		}
	}
}

// withoutDiffs drops the diffs and diff notes from the events of a tree drawn by fullTree.
func withoutDiffs(t *testing.T, tree string) string {
	var spans []apiquery.JaegerSpan
	require.NoError(t, json.Unmarshal([]byte(tree), &spans))
	for i := range spans {
		for j := range spans[i].Logs {
			spans[i].Logs[j].Fields = slices.DeleteFunc(spans[i].Logs[j].Fields, func(kv apiquery.JaegerKeyValue) bool {
				return kv.Key == "diff" || kv.Key == "diff note"
			})
		}
	}
	out, err := json.MarshalIndent(spans, "", " ")
	require.NoError(t, err)
	return string(out)
}

// metricSum sums the samples of the Prometheus series that start with series (a name, or a name
// with labels) on the app's /metrics.
func metricSum(t *testing.T, apiAddr, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + apiAddr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	name, labels, _ := strings.Cut(series, "{")
	labels = strings.TrimSuffix(labels, "}")
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(\{[^}]*\})? ([0-9.e+-]+)$`)
	var sum float64
	for _, m := range re.FindAllStringSubmatch(string(body), -1) {
		if labels != "" && !strings.Contains(m[1], labels) {
			continue
		}
		v, err := strconv.ParseFloat(m[2], 64)
		require.NoError(t, err)
		sum += v
	}
	return sum
}

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/internal/healthz"
	"github.com/kelemetry/kelemetry/internal/natstest"
	"github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/kelemetrix"
	"github.com/kelemetry/kelemetry/natsqueue"

	"github.com/kelemetry/kelemetry/internal/kelemetrixtest"
)

var defaultKelemetrix = filepath.Join("..", "..", "deploy", "kelemetrix.yaml")

// TestKelemetrixFlagAndKey: --kelemetrix-config loads a metrics file, the kelemetrix key of
// --config works too, and errors name the line.
func TestKelemetrixFlagAndKey(t *testing.T) {
	cfg, _, err := parseFlags([]string{"--kelemetrix-config", defaultKelemetrix}, io.Discard)
	require.NoError(t, err)
	require.NotEmpty(t, cfg.Kelemetrix.Metrics)

	extra := filepath.Join(t.TempDir(), "extra.yaml")
	require.NoError(t, os.WriteFile(extra, []byte("metrics:\n- name: extra\n  kind: counter\n  quantity: requestCount\n"), 0o600))
	merged, _, err := parseFlags([]string{"--kelemetrix-config", defaultKelemetrix, "--kelemetrix-config", extra}, io.Discard)
	require.NoError(t, err)
	require.Len(t, merged.Kelemetrix.Metrics, len(cfg.Kelemetrix.Metrics)+1, "repeated: the metrics of both files")
	_, _, err = parseFlags([]string{"--kelemetrix-config", extra, "--kelemetrix-config", extra}, io.Discard)
	assert.ErrorContains(t, err, "defined twice")

	file := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(file, []byte("cluster: a\nkelemetrix:\n  metrics:\n  - name: m\n    kind: counter\n    quantity: requestCount\n"), 0o600))
	cfg, _, err = parseFlags([]string{"--config", file}, io.Discard)
	require.NoError(t, err)
	require.Len(t, cfg.Kelemetrix.Metrics, 1)

	require.NoError(t, os.WriteFile(file, []byte("cluster: a\nkelemetrix:\n  metrics:\n  - name: m\n    kind: counter\n    quantity: requestCount\n    tagFilters:\n    - tag: verb\n      regex: \"[\"\n"), 0o600))
	_, _, err = parseFlags([]string{"--config", file}, io.Discard)
	assert.ErrorContains(t, err, "line 9: kelemetrix metrics[0]: tag filter on \"verb\": regex")
}

// rolloutCounts counts the ResponseComplete events of the rollout fixture by user and verb.
func rolloutCounts(t *testing.T) map[[2]string]int {
	t.Helper()
	f, err := os.Open(rolloutLog)
	require.NoError(t, err)
	defer f.Close()
	counts := map[[2]string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var ev struct {
			Stage string `json:"stage"`
			Verb  string `json:"verb"`
			User  struct {
				Username string `json:"username"`
			} `json:"user"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &ev))
		if ev.Stage == "ResponseComplete" {
			counts[[2]string{ev.User.Username, ev.Verb}]++
		}
	}
	require.NoError(t, sc.Err())
	return counts
}

// TestKelemetrixMetricsFromReplay: with the default kelemetrix config, a replayed audit log shows
// on /metrics as request counts by user and verb, equal to the log's, reads included.
func TestKelemetrixMetricsFromReplay(t *testing.T) {
	cfg, _, err := parseFlags([]string{"--kelemetrix-config", defaultKelemetrix, "--data-dir", ""}, io.Discard)
	require.NoError(t, err)
	test := testConfig(t, "")
	test.Kelemetrix = cfg.Kelemetrix
	test.Audit.Replay = []string{rolloutLog}
	r := start(t, test)
	waitReplay(t, r)

	want := rolloutCounts(t)
	require.NotZero(t, want[[2]string{"system:serviceaccount:kube-system:generic-garbage-collector", "get"}], "the fixture has reads")
	sample := regexp.MustCompile(`(?m)^kelemetrix_requests_total\{([^}]*)\} (\S+)$`)
	label := func(labels, name string) string {
		m := regexp.MustCompile(name + `="([^"]*)"`).FindStringSubmatch(labels)
		if m == nil {
			return ""
		}
		return m[1]
	}
	var got map[[2]string]int
	require.Eventually(t, func() bool {
		resp, err := http.Get(r.api("/metrics"))
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		got = map[[2]string]int{}
		for _, m := range sample.FindAllStringSubmatch(string(body), -1) {
			v, err := strconv.ParseFloat(m[2], 64)
			require.NoError(t, err)
			got[[2]string{label(m[1], "user"), label(m[1], "verb")}] += int(v)
		}
		return fmt.Sprint(got) == fmt.Sprint(want)
	}, 10*time.Second, 50*time.Millisecond, "kelemetrix_requests_total by user and verb")
	assert.Equal(t, want, got)
}

// auditEvent is one audit event of a webhook batch (JSON), at ResponseComplete.
func auditEvent(id, user, verb, name string, code int, at time.Time) string {
	uri := "/api/v1/namespaces/default/pods/" + name
	body := ""
	if verb == "create" {
		uri = "/api/v1/namespaces/default/pods"
		body = fmt.Sprintf(`,"responseObject":{"kind":"Pod","apiVersion":"v1","metadata":{"name":%q,"namespace":"default","uid":"uid-%s","resourceVersion":"7"}}`, name, name)
	}
	return fmt.Sprintf(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","auditID":%q,"stage":"ResponseComplete",`+
		`"requestURI":%q,"verb":%q,"user":{"username":%q},"objectRef":{"resource":"pods","namespace":"default","name":%q,"apiVersion":"v1"},`+
		`"responseStatus":{"metadata":{},"code":%d},"requestReceivedTimestamp":%q,"stageTimestamp":%q%s}`,
		id, uri, verb, user, name, code, at.Format(time.RFC3339Nano), at.Add(5*time.Millisecond).Format(time.RFC3339Nano), body)
}

// TestKelemetrixFedByEveryQueue: whatever the audit queue (the durable local queue, or NATS
// JetStream), the batch posted to the webhook reaches kelemetrix through audit.Module's
// observers: its counters equal the batch's requests, reads included, while the tracer stores a
// span for the write and none for the reads.
func TestKelemetrixFedByEveryQueue(t *testing.T) {
	for _, queue := range []string{"durable", "nats"} {
		t.Run(queue, func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig(t, dir)
			cfg.Kelemetrix = kelemetrix.Config{Metrics: []kelemetrix.MetricConfig{{Name: "kelemetrix_requests", Kind: "counter",
				Quantity: "requestCount", Labels: []string{"user", "verb"}}}}
			if queue == "nats" {
				js := natstest.StartJetStream(t)
				cfg.Audit.Queue.NATS = natsqueue.Config{URLs: []string{js.URL()}, Partitions: 4, AckWait: 5 * time.Second, PinnedTTL: 2 * time.Second, RetryBackoff: 20 * time.Millisecond,
					MaxRetryBackoff: 200 * time.Millisecond, ConnectTimeout: time.Second, ReconnectWait: 20 * time.Millisecond,
					PublishTimeout: 2 * time.Second}
			}
			r := start(t, cfg)

			// A read of the pod before its create (same object: handled in order), a read of a pod
			// nobody writes, and a failed read.
			at := time.Now().Add(-time.Minute).UTC()
			batch := `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + strings.Join([]string{
				auditEvent("e1", "bob", "get", "written", 404, at),
				auditEvent("e2", "alice", "create", "written", 201, at.Add(time.Second)),
				auditEvent("e3", "bob", "get", "only-read", 200, at.Add(2*time.Second)),
				auditEvent("e4", "carol", "get", "only-read", 200, at.Add(3*time.Second)),
			}, ",") + `]}`
			code, body := post(t, r.audit("/audit"), []byte(batch))
			require.Equal(t, http.StatusOK, code, body)

			want := map[string]int{"alice create": 1, "bob get": 2, "carol get": 1}
			var got map[string]int
			require.Eventually(t, func() bool {
				got = kelemetrixtest.RequestsByUser(t, r.api("/metrics"))
				return fmt.Sprint(got) == fmt.Sprint(want)
			}, 20*time.Second, 50*time.Millisecond, "kelemetrix counts of the batch")
			assert.Equal(t, want, got)

			// The queue in use is the one under test.
			var h healthz.Body
			require.Equal(t, http.StatusOK, getJSON(t, r.api("/healthz"), &h))
			_, err := os.Stat(filepath.Join(dir, "audit-queue"))
			if queue == "nats" {
				assert.Equal(t, "nats: connected", h.Queue)
				assert.True(t, os.IsNotExist(err), "no durable local queue with NATS: %v", err)
			} else {
				assert.Equal(t, "durable: ok", h.Queue)
				assert.NoError(t, err, "the durable local queue's folder")
			}

			// The tracer: the write is stored, the reads are not.
			obj := findObject(t, r, "resource=pods&name=written")
			require.Len(t, obj.Windows, 1)
			var titles []string
			require.Eventually(t, func() bool {
				titles = nil
				for _, s := range spansOfKind(storedTrace(t, r, obj.Windows[0].TraceID), "event") {
					titles = append(titles, s.OperationName)
				}
				return len(titles) > 0
			}, 10*time.Second, 20*time.Millisecond)
			assert.Equal(t, []string{"alice create"}, titles, "no span for bob's get of the same pod")
			var none query.ObjectsResponse
			require.Equal(t, http.StatusOK, getJSON(t, r.api("/api/objects?resource=pods&name=only-read"), &none))
			assert.Empty(t, none.Objects, "no span for the reads of a pod nobody wrote")
		})
	}
}

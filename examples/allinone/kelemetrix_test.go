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
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

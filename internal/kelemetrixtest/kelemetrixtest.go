// Package kelemetrixtest holds helpers for tests that read kelemetrix's metrics from a running
// process.
package kelemetrixtest

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	requestsTotal = regexp.MustCompile(`(?m)^kelemetrix_requests_total\{([^}]*)\} (\S+)$`)
	userVerb      = regexp.MustCompile(`user="([^"]*)".*verb="([^"]*)"`)
)

// RequestsByUser reads the Prometheus exposition at metricsURL and sums the samples of
// kelemetrix_requests_total by "user verb".
func RequestsByUser(t testing.TB, metricsURL string) map[string]int {
	t.Helper()
	resp, err := http.Get(metricsURL)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := map[string]int{}
	for _, m := range requestsTotal.FindAllStringSubmatch(string(body), -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		require.NoError(t, err)
		uv := userVerb.FindStringSubmatch(m[1])
		require.NotNil(t, uv, m[1])
		out[uv[1]+" "+uv[2]] += int(v)
	}
	return out
}

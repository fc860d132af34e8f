package kelemetry

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/frontend"
	"github.com/kelemetry/kelemetry/internal/frontendtest"
	"github.com/kelemetry/kelemetry/internal/query"
)

// criticalRules loads a configuration file, builds the query side from it (as the all-in-one
// does) over the recorded rollout, and answers the rules of the Deployment's critical path, by
// step.
func criticalRules(t *testing.T, yaml string) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kelemetry.yaml")
	require.NoError(t, os.WriteFile(path, []byte(yaml), 0o600))
	c, err := LoadConfig(path)
	require.NoError(t, err)
	cfgs, err := subConfigs(c)
	require.NoError(t, err)
	_, api, err := frontend.New(cfgs.Query, frontend.Deps{Reader: frontendtest.Rollout(t)})
	require.NoError(t, err)
	mux := http.NewServeMux()
	api.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	get := func(u string, into any) {
		t.Helper()
		resp, err := http.Get(u)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		require.NoError(t, json.Unmarshal(body, into))
	}
	var found struct {
		Data []query.JaegerTrace `json:"data"`
	}
	get(srv.URL+"/api/traces?"+url.Values{"service": {"tracing [full tree]"}, "tags": {`{"resource":"deployments","name":"demo"}`},
		"start": {strconv.FormatInt(frontendtest.RolloutFrom.UnixMicro(), 10)}, "end": {strconv.FormatInt(frontendtest.RolloutTo.UnixMicro(), 10)}}.Encode(), &found)
	require.Len(t, found.Data, 1)
	var cp struct {
		Data query.CriticalPath `json:"data"`
	}
	get(srv.URL+"/api/critical-path/"+found.Data[0].TraceID, &cp)
	require.NotEmpty(t, cp.Data.Steps)
	var rules []string
	for _, s := range cp.Data.Steps {
		rules = append(rules, s.Rule)
	}
	return rules
}

// TestCausalRulesConfig: query.causalRules of a configuration file is the table the API's
// critical path follows; unset, the defaults; an empty list, none (every step linked).
func TestCausalRulesConfig(t *testing.T) {
	t.Run("configured", func(t *testing.T) {
		rules := criticalRules(t, `
query:
  causalRules:
    - name: bound-by-scheduler
      controllers: [kube-scheduler]
      resource: pods
      subresource: binding
      verbs: [create]
      causeResource: pods
      causeVerbs: [create]
      relation: self
`)
		assert.Contains(t, rules, "bound-by-scheduler")
		for _, r := range rules {
			assert.Contains(t, []string{"start", "linked", "unexplained", "bound-by-scheduler"}, r, "only the configured rule")
		}
	})
	t.Run("docs example", func(t *testing.T) {
		readme, err := os.ReadFile(filepath.Join("docs", "guides", "critical-path.md"))
		require.NoError(t, err)
		const open = "```yaml\nquery:\n  causalRules:\n"
		_, block, ok := strings.Cut(string(readme), open)
		require.True(t, ok, "the critical path guide shows query.causalRules")
		block, _, ok = strings.Cut(block, "```")
		require.True(t, ok)
		rules := criticalRules(t, strings.TrimPrefix(open, "```yaml\n")+block)
		assert.Contains(t, rules, "schedule")
		assert.NotContains(t, rules, "pod-start", "the example replaces the defaults")
	})
	t.Run("unset", func(t *testing.T) {
		rules := criticalRules(t, "query: {maxConcurrent: 2}\n")
		assert.Contains(t, rules, "schedule")
		assert.Contains(t, rules, "deployment-spec")
	})
	t.Run("empty", func(t *testing.T) {
		rules := criticalRules(t, "query:\n  causalRules: []\n")
		for _, r := range rules[1:] {
			assert.Equal(t, "linked", r)
		}
	})
}

// TestCausalRulesConfigErrors: invalid rules are refused at load or validation with the rule's
// place, name and what is wrong.
func TestCausalRulesConfigErrors(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"no relation": {"query:\n  causalRules:\n    - {name: a, controllers: [x], resource: pods}\n",
			`frontend: causalRules[0] "a": relation is required: self, parent, child, sibling or linked`},
		"bad relation": {"query:\n  causalRules:\n    - {name: a, relation: cousin}\n",
			`causalRules[0] "a": relation "cousin": want self, parent, child, sibling or linked`},
		"no name":    {"query:\n  causalRules:\n    - {relation: self}\n", "causalRules[0]: name is required"},
		"reserved":   {"query:\n  causalRules:\n    - {name: linked, relation: self}\n", `name "linked" is reserved`},
		"twice":      {"query:\n  causalRules:\n    - {name: a, relation: self}\n    - {name: a, relation: self}\n", `causalRules[1] "a": name given twice (also causalRules[0])`},
		"read verb":  {"query:\n  causalRules:\n    - {name: a, relation: self, causeVerbs: [get]}\n", `causeVerbs: "get" is not a write verb`},
		"empty ctrl": {"query:\n  causalRules:\n    - {name: a, relation: self, controllers: [\"\"]}\n", "controllers: an empty name"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "kelemetry.yaml")
			require.NoError(t, os.WriteFile(path, []byte(tc.yaml), 0o600))
			c, err := LoadConfig(path)
			require.NoError(t, err)
			err = c.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	// A misspelt key is refused when the file is read.
	path := filepath.Join(t.TempDir(), "kelemetry.yaml")
	require.NoError(t, os.WriteFile(path, []byte("query:\n  causalRules:\n    - {name: a, relation: self, causeFeild: spec}\n"), 0o600))
	_, err := LoadConfig(path)
	require.ErrorContains(t, err, "causeFeild")
}

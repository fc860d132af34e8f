package kelemetry_test

import (
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.yaml.in/yaml/v3"

	"github.com/kelemetry/kelemetry"
	"github.com/kelemetry/kelemetry/httpserver"
)

// openAPIDoc is the part of docs/reference/openapi.yaml the test reads.
type openAPIDoc struct {
	Paths map[string]map[string]struct {
		Responses map[string]struct {
			Ref     string         `yaml:"$ref"`
			Content map[string]any `yaml:"content"`
		} `yaml:"responses"`
		Examples []struct {
			Path     string `yaml:"path"`
			Status   int    `yaml:"status"`
			Listener string `yaml:"listener"`
			Body     string `yaml:"body"`
		} `yaml:"x-kelemetry-examples"`
	} `yaml:"paths"`
	Components struct {
		Responses map[string]struct {
			Content map[string]any `yaml:"content"`
		} `yaml:"responses"`
	} `yaml:"components"`
}

// routePattern finds the routes the code registers: "METHOD /path" string literals.
var routePattern = regexp.MustCompile(`"(GET|POST|PUT|PATCH|DELETE|HEAD) (/[^" ]*)"`)

// sourceRoutes returns "method path" of every route registered in the module's non-test code,
// with ServeMux's forms written as OpenAPI paths ("/{$}" is "/", "/static/" is "/static/{file}").
func sourceRoutes(t *testing.T) []string {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch p {
			case "e2e", "examples", "deploy", "testdata", "node_modules", ".git":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range routePattern.FindAllStringSubmatch(string(src), -1) {
			path := strings.TrimSuffix(m[2], "{$}")
			if path != "/" && strings.HasSuffix(path, "/") {
				path += "{file}"
			}
			seen[strings.ToLower(m[1])+" "+path] = true
		}
		return nil
	})
	require.NoError(t, err)
	out := make([]string, 0, len(seen))
	for r := range seen {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// docs/reference/openapi.yaml describes every route the code registers, and only those; each
// described operation's examples, sent to a real all-in-one that replayed the recorded rollout,
// answer the status they name, which the operation documents, with a documented content type.
func TestOpenAPIMatchesTheRoutes(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("docs", "reference", "openapi.yaml"))
	require.NoError(t, err)
	var doc openAPIDoc
	require.NoError(t, yaml.Unmarshal(data, &doc))

	var described []string
	for path, ops := range doc.Paths {
		for method := range ops {
			described = append(described, method+" "+path)
		}
	}
	sort.Strings(described)
	routes := sourceRoutes(t)
	require.Greater(t, len(routes), 25)
	assert.Equal(t, routes, described, "the routes of the code (left) and of openapi.yaml (right)")

	cfg := kelemetry.Config{Cluster: "test", AuditAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", OTLPAddr: "127.0.0.1:0"}
	cfg.APIServerTraces.Enabled = true
	cfg.Audit.OTLPLogs.Enabled = true
	cfg.Audit.Replay = []string{filepath.Join("testdata", "rollout", "audit.jsonl")}
	var servers *httpserver.Servers
	app := fx.New(kelemetry.Module, fx.Supply(cfg, slog.New(slog.DiscardHandler)), fx.Populate(&servers), fx.NopLogger)
	require.NoError(t, app.Start(t.Context()))
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Cleanup(func() {
		client.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = app.Stop(ctx)
	})
	api, audit, otlp := "http://"+servers.APIAddr(), "http://"+servers.AuditAddr(), "http://"+servers.OTLPAddr()
	getJSON := func(path string, out any) {
		t.Helper()
		resp, err := client.Get(api + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
	}
	require.Eventually(t, func() bool {
		var h struct {
			Replay     struct{ Done bool } `json:"replay"`
			QueueDepth int                 `json:"queueDepth"`
			LinkJobs   int                 `json:"linkJobs"`
		}
		getJSON("/healthz", &h)
		return h.Replay.Done && h.QueueDepth == 0 && h.LinkJobs == 0
	}, time.Minute, 20*time.Millisecond)

	// The example values: the Deployment's stored trace, its window, a display ID of its tree.
	var objs struct {
		Objects []struct {
			Windows []struct {
				Start   time.Time `json:"start"`
				TraceID string    `json:"traceID"`
			} `json:"windows"`
		} `json:"objects"`
	}
	getJSON("/api/objects?resource=deployments&name=demo", &objs)
	require.Len(t, objs.Objects, 1)
	win := objs.Objects[0].Windows[0]
	mid, later := win.Start.Add(10*time.Minute), win.Start.Add(30*time.Minute)
	vals := map[string]string{
		"{storedTraceID}": win.TraceID,
		"{time}":          mid.UTC().Format(time.RFC3339),
		"{later}":         later.UTC().Format(time.RFC3339),
		"{startUs}":       strconv.FormatInt(win.Start.Add(-time.Hour).UnixMicro(), 10),
		"{endUs}":         strconv.FormatInt(later.Add(time.Hour).UnixMicro(), 10),
		"{endMs}":         strconv.FormatInt(later.Add(time.Hour).UnixMilli(), 10),
	}
	var found struct {
		Data []struct {
			TraceID string `json:"traceID"`
		} `json:"data"`
	}
	getJSON("/api/traces?service="+url.QueryEscape("tracing [full tree]")+"&tags="+url.QueryEscape(`{"resource":"deployments","name":"demo"}`)+
		"&start="+vals["{startUs}"]+"&end="+vals["{endUs}"], &found)
	require.NotEmpty(t, found.Data)
	vals["{displayTraceID}"] = found.Data[0].TraceID

	examples := 0
	for path, ops := range doc.Paths {
		for method, op := range ops {
			assert.NotEmpty(t, op.Examples, "%s %s has no x-kelemetry-examples", method, path)
			for _, ex := range op.Examples {
				examples++
				p := ex.Path
				for k, v := range vals {
					p = strings.ReplaceAll(p, k, v)
				}
				base := api
				switch ex.Listener {
				case "audit":
					base = audit
				case "otlp":
					base = otlp
				}
				req, err := http.NewRequestWithContext(t.Context(), strings.ToUpper(method), base+p, strings.NewReader(ex.Body))
				require.NoError(t, err)
				if ex.Body != "" {
					req.Header.Set("Content-Type", "application/json")
				}
				resp, err := client.Do(req)
				require.NoError(t, err)
				body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
				resp.Body.Close()
				name := method + " " + p
				if !assert.Equal(t, ex.Status, resp.StatusCode, "%s: %s", name, body) {
					continue
				}
				r, ok := op.Responses[strconv.Itoa(resp.StatusCode)]
				if !assert.True(t, ok, "%s answered %d, which %s %s does not document", name, resp.StatusCode, method, path) {
					continue
				}
				content := r.Content
				if r.Ref != "" {
					content = doc.Components.Responses[strings.TrimPrefix(r.Ref, "#/components/responses/")].Content
				}
				if len(content) == 0 {
					continue
				}
				mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
				_, documented := content[mt]
				assert.True(t, documented, "%s: content type %q, documented %v", name, mt, keys(content))
			}
		}
	}
	t.Logf("%d routes, %d examples", len(routes), examples)
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

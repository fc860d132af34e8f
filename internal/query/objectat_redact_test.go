package query_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/audittest"
	"github.com/kelemetry/kelemetry/store/memory"
)

var secretT0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// secretWrite is one audit line: a write of Secret default/creds at secretT0+sec with data.
func secretWrite(id, verb string, sec int, rv string, data map[string]string) string {
	enc := map[string]string{}
	for k, v := range data {
		enc[k] = base64.StdEncoding.EncodeToString([]byte(v))
	}
	body, _ := json.Marshal(map[string]any{
		"kind": "Secret", "apiVersion": "v1", "type": "Opaque", "data": enc,
		"metadata": map[string]any{"name": "creds", "namespace": "default", "uid": "u-1", "resourceVersion": rv,
			"labels": map[string]string{"app": "demo"}},
	})
	at := secretT0.Add(time.Duration(sec) * time.Second)
	code := 200
	if verb == "create" {
		code = 201
	}
	return fmt.Sprintf(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","auditID":%q,"stage":"ResponseComplete",`+
		`"requestURI":"/api/v1/namespaces/default/secrets/creds","verb":%q,"user":{"username":"alice"},"sourceIPs":["127.0.0.1"],`+
		`"objectRef":{"resource":"secrets","namespace":"default","name":"creds","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":%d},`+
		`"requestObject":%s,"responseObject":%s,"requestReceivedTimestamp":%q,"stageTimestamp":%q}`,
		id, verb, code, body, body, at.Add(-time.Millisecond).Format(time.RFC3339Nano), at.Format(time.RFC3339Nano))
}

// secretStore replays the Secret's writes: a creation and an update, then, as if Kelemetry had
// restarted (a new consumer, whose diff cache is empty), one more update.
func secretStore(t *testing.T) *memory.Store {
	t.Helper()
	st := memory.New(memory.Config{}, 0)
	dir := t.TempDir()
	for i, lines := range [][]string{
		{
			secretWrite("a1", "create", 0, "10", map[string]string{"password": "hunter2"}),
			secretWrite("a2", "update", 5, "11", map[string]string{"password": "hunter3", "token": "tok-1"}),
		},
		{secretWrite("a3", "update", 10, "12", map[string]string{"password": "hunter4", "token": "tok-1"})},
	} {
		path := filepath.Join(dir, fmt.Sprintf("audit%d.jsonl", i))
		require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
		require.NoError(t, audittest.ReplayFile(context.Background(), audittest.Config{
			Deps: aggregator.Deps{Sinks: []aggregator.Sink{st}},
		}, path))
	}
	return st
}

func secretAt(srv string, at time.Time) string {
	v := url.Values{"cluster": {"test"}, "resource": {"secrets"}, "namespace": {"default"}, "name": {"creds"},
		"time": {at.Format(time.RFC3339Nano)}}
	return srv + "/api/objects/at?" + v.Encode()
}

// TestObjectAtRedacted: a Secret's data stays redacted in every reconstruction and diff; the
// plain values appear nowhere.
func TestObjectAtRedacted(t *testing.T) {
	_, srv := newAPI(t, secretStore(t))
	secrets := []string{"hunter2", "hunter3", "hunter4", "tok-1"}
	var enc []string
	for _, s := range secrets {
		enc = append(enc, base64.StdEncoding.EncodeToString([]byte(s)))
	}
	noSecret := func(body string) {
		t.Helper()
		for _, s := range append(secrets, enc...) {
			assert.NotContains(t, body, s)
		}
	}
	markers := map[string]string{}
	for _, sec := range []int{0, 5} {
		code, raw := fetch(t, secretAt(srv.URL, secretT0.Add(time.Duration(sec)*time.Second)))
		require.Equal(t, http.StatusOK, code, string(raw))
		noSecret(string(raw))
		var st objectState
		require.NoError(t, json.Unmarshal(raw, &st))
		assert.Empty(t, st.Data.Gaps)
		body := decodeBody(t, st.Data.Body)
		data := body["data"].(map[string]any)
		pw, _ := data["password"].(string)
		assert.True(t, strings.HasPrefix(pw, "<redacted"), "password %q", pw)
		markers[fmt.Sprint(sec)] = pw
		if sec == 5 {
			tok, _ := data["token"].(string)
			assert.True(t, strings.HasPrefix(tok, "<redacted"), "token %q", tok)
			assert.Equal(t, 1, st.Data.Source.WritesApplied)
			assert.Equal(t, "11", st.Data.Source.ResourceVersion)
		}
	}
	assert.NotEqual(t, markers["0"], markers["5"], "a changed value gets another marker")

	// The diff between the two moments: redacted, and the markers only.
	v := url.Values{"cluster": {"test"}, "resource": {"secrets"}, "namespace": {"default"}, "name": {"creds"},
		"from": {secretT0.Format(time.RFC3339Nano)}, "to": {secretT0.Add(5 * time.Second).Format(time.RFC3339Nano)}}
	code, raw := fetch(t, srv.URL+"/api/objects/diff?"+v.Encode())
	require.Equal(t, http.StatusOK, code, string(raw))
	noSecret(string(raw))
	var d struct {
		Data struct {
			Changes []struct {
				Path     string `json:"path"`
				Op       string `json:"op"`
				Redacted bool   `json:"redacted"`
			} `json:"changes"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(raw, &d))
	paths := map[string]string{}
	for _, c := range d.Data.Changes {
		paths[c.Path] = c.Op
		assert.True(t, c.Redacted, c.Path)
	}
	assert.Equal(t, map[string]string{"data.password": "replace", "data.token": "add"}, paths)
}

// TestObjectAtGap: a write whose diff could not be computed (Kelemetry restarted and had not
// seen the object since) is reported as a gap, and the state before it is kept.
func TestObjectAtGap(t *testing.T) {
	_, srv := newAPI(t, secretStore(t))
	code, raw := fetch(t, secretAt(srv.URL, secretT0.Add(11*time.Second)))
	require.Equal(t, http.StatusOK, code, string(raw))
	var st struct {
		Data struct {
			Gaps []struct {
				From    time.Time `json:"from"`
				To      time.Time `json:"to"`
				Message string    `json:"message"`
			} `json:"gaps"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(raw, &st))
	require.Len(t, st.Data.Gaps, 1, string(raw))
	g := st.Data.Gaps[0]
	assert.Contains(t, g.Message, "no previous version seen")
	assert.True(t, g.From.Equal(secretT0.Add(5*time.Second)), "gap from %s", g.From)
	assert.True(t, g.To.Equal(secretT0.Add(10*time.Second)), "gap to %s", g.To)
}

// TestObjectAtAppliedSecret: a Secret written by kubectl apply carries its whole manifest, data
// included, in the kubectl.kubernetes.io/last-applied-configuration annotation; that copy is
// redacted like data, at every moment and in the diff.
func TestObjectAtAppliedSecret(t *testing.T) {
	applied := func(id, verb string, sec int, rv, pw string) string {
		enc := base64.StdEncoding.EncodeToString([]byte(pw))
		manifest := fmt.Sprintf(`{"apiVersion":"v1","data":{"password":%q},"kind":"Secret","metadata":{"annotations":{},"name":"creds","namespace":"default"}}`, enc)
		body, _ := json.Marshal(map[string]any{
			"kind": "Secret", "apiVersion": "v1", "type": "Opaque", "data": map[string]string{"password": enc},
			"metadata": map[string]any{"name": "creds", "namespace": "default", "uid": "u-1", "resourceVersion": rv,
				"annotations": map[string]string{"kubectl.kubernetes.io/last-applied-configuration": manifest + "\n"}},
		})
		line := secretWrite(id, verb, sec, rv, nil)
		// Swap the plain body of secretWrite for the applied one (request and response).
		plain, _ := json.Marshal(map[string]any{
			"kind": "Secret", "apiVersion": "v1", "type": "Opaque", "data": map[string]string{},
			"metadata": map[string]any{"name": "creds", "namespace": "default", "uid": "u-1", "resourceVersion": rv,
				"labels": map[string]string{"app": "demo"}},
		})
		require.Contains(t, line, string(plain))
		return strings.ReplaceAll(line, string(plain), string(body))
	}
	st := memory.New(memory.Config{}, 0)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	lines := []string{applied("b1", "create", 0, "10", "hunter2"), applied("b2", "update", 5, "11", "hunter3")}
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	require.NoError(t, audittest.ReplayFile(context.Background(), audittest.Config{
		Deps: aggregator.Deps{Sinks: []aggregator.Sink{st}},
	}, path))
	_, srv := newAPI(t, st)

	clear := []string{"hunter2", "hunter3", base64.StdEncoding.EncodeToString([]byte("hunter2")),
		base64.StdEncoding.EncodeToString([]byte("hunter3"))}
	for _, sec := range []int{0, 5} {
		code, raw := fetch(t, secretAt(srv.URL, secretT0.Add(time.Duration(sec)*time.Second)))
		require.Equal(t, http.StatusOK, code, string(raw))
		for _, s := range clear {
			assert.NotContains(t, string(raw), s, "at %ds", sec)
		}
		assert.Contains(t, string(raw), "last-applied-configuration", "the annotation is kept, as a marker")
	}
	v := url.Values{"cluster": {"test"}, "resource": {"secrets"}, "namespace": {"default"}, "name": {"creds"},
		"from": {secretT0.Format(time.RFC3339Nano)}, "to": {secretT0.Add(5 * time.Second).Format(time.RFC3339Nano)}}
	code, raw := fetch(t, srv.URL+"/api/objects/diff?"+v.Encode())
	require.Equal(t, http.StatusOK, code, string(raw))
	for _, s := range clear {
		assert.NotContains(t, string(raw), s, "diff")
	}
}

package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/internal/httpservertest"
)

// The secure setup of the flags: the webhook over TLS taking only kube-apiserver's client
// certificate, the API over TLS with a bearer token.
func TestSecureFlags(t *testing.T) {
	dir := t.TempDir()
	files, err := httpservertest.WriteFiles(dir, "test-ca", "kube-apiserver")
	require.NoError(t, err)
	tokens := filepath.Join(dir, "api-tokens")
	require.NoError(t, os.WriteFile(tokens, []byte("s3cret\n"), 0o600))

	_, _, err = parseFlags([]string{"--audit-client-ca", files.CA}, io.Discard)
	require.ErrorContains(t, err, "auditAuth: clientCAFile needs TLS")
	_, _, err = parseFlags([]string{"--http-token-file", filepath.Join(dir, "missing")}, io.Discard)
	require.ErrorContains(t, err, "httpAuth: tokenFiles: read token file")

	cfg, _, err := parseFlags([]string{"--data-dir=", "--cluster=test", "--audit-addr=127.0.0.1:0", "--http-addr=" + freeAddr(t),
		"--audit-tls-cert", files.ServerCert, "--audit-tls-key", files.ServerKey, "--audit-client-ca", files.CA,
		"--http-tls-cert", files.ServerCert, "--http-tls-key", files.ServerKey, "--http-token-file", tokens}, io.Discard)
	require.NoError(t, err)
	r := start(t, cfg)

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(mustRead(t, files.CA))
	client := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
			TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs, MinVersion: tls.VersionTLS12}}}
	}
	pair, err := tls.LoadX509KeyPair(files.ClientCert, files.ClientKey)
	require.NoError(t, err)
	f, err := os.Open(filepath.Join("..", "..", "testdata", "rollout", "webhook-batches.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	require.True(t, sc.Scan())
	post := func(c *http.Client, body []byte) int {
		resp, err := c.Post("https://"+r.servers.AuditAddr()+"/audit/test", "application/json", bytes.NewReader(body))
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	// A small body for the refusal: the 401 comes before the body is read and closes the
	// connection, so a client still writing a large body may see the reset before the answer.
	assert.Equal(t, http.StatusUnauthorized, post(client(), []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[]}`)), "no client certificate")
	assert.Equal(t, http.StatusOK, post(client(pair), sc.Bytes()))

	get := func(path, token string) int {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+r.servers.APIAddr()+path, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, p := range []string{"/api/objects?resource=deployments", "/metrics", "/api/services"} {
		assert.Equal(t, http.StatusUnauthorized, get(p, ""), p)
		assert.Equal(t, http.StatusUnauthorized, get(p, "wrong"), p)
		assert.Equal(t, http.StatusOK, get(p, "s3cret"), p)
	}
	assert.Equal(t, http.StatusOK, get("/", ""), "the UI's page holds no data")
	assert.Equal(t, http.StatusOK, get("/static/app.js", ""))
	assert.Equal(t, http.StatusOK, get("/healthz", ""), "probes need no token")
	resp, err := http.Get("http://" + r.servers.APIAddr() + "/api/services")
	if err == nil {
		resp.Body.Close()
		assert.NotEqual(t, http.StatusOK, resp.StatusCode, "no plain HTTP")
	}
}

// freeAddr returns a free port on 127.0.0.1 (the listeners share one when both are given
// port 0 on the same host).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

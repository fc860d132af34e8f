package httpserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/internal/logtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

var quiet = slog.New(slog.DiscardHandler)

// startServers builds and starts the listeners of cfg with the given handlers.
func startServers(t *testing.T, cfg Config, audit, api []Handler, health Health, mp *sdkmetric.MeterProvider) *Servers {
	t.Helper()
	return startServersLogged(t, cfg, audit, api, health, mp, quiet)
}

// startServersLogged is startServers with the servers' logger.
func startServersLogged(t *testing.T, cfg Config, audit, api []Handler, health Health, mp *sdkmetric.MeterProvider, logger *slog.Logger) *Servers {
	t.Helper()
	p := Deps{Logger: logger, Audit: audit, API: api, Health: health}
	if mp != nil {
		p.Meter = Meter{Provider: mp}
	}
	s, err := New(cfg, p)
	require.NoError(t, err)
	require.NoError(t, s.Start(t.Context()))
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s
}

// httpsClient trusts ca and presents certs; it opens a new connection per request.
func httpsClient(ca *testCA, certs ...tls.Certificate) *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{RootCAs: pool, Certificates: certs, MinVersion: tls.VersionTLS12},
	}}
}

func do(t *testing.T, c *http.Client, method, url, token string, header map[string]string, body io.Reader) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, body)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func rejectedCount(t *testing.T, reader *sdkmetric.ManualReader, listener, reason string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "kelemetry.http.auth.rejected" {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			require.True(t, ok)
			for _, dp := range sum.DataPoints {
				l, _ := dp.Attributes.Value("listener")
				r, _ := dp.Attributes.Value("reason")
				if l.AsString() == listener && r.AsString() == reason {
					n += dp.Value
				}
			}
		}
	}
	return n
}

// The listeners bind to localhost unless configured.
func TestDefaultsBindLocalhost(t *testing.T) {
	cfg := Config{}.WithDefaults()
	assert.Equal(t, "127.0.0.1:8080", cfg.AuditAddr)
	assert.Equal(t, "127.0.0.1:16686", cfg.APIAddr)
}

// The listener serves TLS 1.2+ with its certificate files, and serves a rotated certificate
// without a restart.
func TestTLSServesAndReloadsCertificate(t *testing.T) {
	dir := t.TempDir()
	ca1, ca2 := newTestCA(t, "ca-one"), newTestCA(t, "ca-two")
	files := serverFiles(t, ca1, dir)
	var rec logtest.Recorder
	s := startServersLogged(t, Config{AuditAddr: "127.0.0.1:0", AuditTLS: files, ReloadInterval: 20 * time.Millisecond},
		[]Handler{Route("POST /audit", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))},
		nil, nil, nil, slog.New(&rec))

	issuer := func(ca *testCA, maxVersion uint16) (string, error) {
		pool := x509.NewCertPool()
		pool.AddCert(ca.cert)
		conn, err := tls.Dial("tcp", s.AuditAddr(), &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS10, MaxVersion: maxVersion}) // offers old versions on purpose
		if err != nil {
			return "", err
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Issuer.CommonName, nil
	}
	got, err := issuer(ca1, 0)
	require.NoError(t, err)
	assert.Equal(t, "ca-one", got)
	_, err = issuer(ca1, tls.VersionTLS11)
	require.Error(t, err, "TLS 1.1 is refused")

	// Plain HTTP is not served.
	resp, err := http.Post("http://"+s.AuditAddr()+"/audit", "application/json", strings.NewReader("{}"))
	if err == nil {
		resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "plain HTTP to a TLS listener")
	}

	// Rotate: a certificate of another CA is written over the files.
	c, k := ca2.issue(t, "kelemetry", false)
	require.NoError(t, os.WriteFile(files.KeyFile, k, 0o600))
	require.NoError(t, os.WriteFile(files.CertFile, c, 0o600))
	require.Eventually(t, func() bool {
		got, err := issuer(ca2, 0)
		return err == nil && got == "ca-two"
	}, 5*time.Second, 30*time.Millisecond, "the rotated certificate is served")

	// A broken rotation keeps the last good pair: handshakes (each may re-read the files) until one
	// has read the broken files (the warning), then the previous certificate is still served.
	require.NoError(t, os.WriteFile(files.CertFile, []byte("garbage"), 0o600))
	require.Eventually(t, func() bool {
		_, _ = issuer(ca2, 0)
		return len(messages(&rec, "reload TLS certificate: keeping the previous one")) > 0
	}, 5*time.Second, 10*time.Millisecond, "a handshake re-reads the broken files")
	got, err = issuer(ca2, 0)
	require.NoError(t, err)
	assert.Equal(t, "ca-two", got)
	code, body := do(t, httpsClient(ca2), http.MethodPost, "https://"+s.AuditAddr()+"/audit", "", nil, strings.NewReader("{}"))
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok", body)
}

// bodyProbe records whether the handler ran.
type bodyProbe struct{ called atomic.Int32 }

func (p *bodyProbe) handler() Handler {
	return Route("POST /audit", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.called.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "accepted")
	}))
}

// secretHealth is a /healthz that tells more than a probe needs.
var secretHealth Health = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	_, _ = io.WriteString(w, `{"status":"ok","replay":{"files":["/secret/path"]}}`)
})

// The webhook takes only clients with a certificate of the configured CA; the others get 401
// without their body being read, counted in kelemetry.http.auth.rejected; /healthz stays open
// and tells them only the status.
func TestAuditRequiresClientCertificate(t *testing.T) {
	dir := t.TempDir()
	serverCA, clientCA, otherCA := newTestCA(t, "server-ca"), newTestCA(t, "client-ca"), newTestCA(t, "other-ca")
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	var probe bodyProbe
	s := startServers(t, Config{AuditAddr: "127.0.0.1:0", AuditTLS: serverFiles(t, serverCA, dir),
		AuditAuth: AuditAuthConfig{ClientCAFile: writeFile(t, dir, "client-ca.crt", clientCA.pem)}},
		[]Handler{probe.handler()}, nil, secretHealth, mp)
	url := "https://" + s.AuditAddr()

	code, _ := do(t, httpsClient(serverCA), http.MethodPost, url+"/audit", "", nil, strings.NewReader("{}"))
	assert.Equal(t, http.StatusUnauthorized, code, "no client certificate")
	assert.Zero(t, probe.called.Load(), "the handler never ran")
	assert.Equal(t, int64(1), rejectedCount(t, reader, "audit", "missing"))

	// The same over HTTP/2 (kube-apiserver's client negotiates it).
	h2 := httpsClient(serverCA)
	h2.Transport.(*http.Transport).ForceAttemptHTTP2 = true
	resp, err := h2.Post(url+"/audit", "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, "HTTP/2.0", resp.Proto)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	h2c := httpsClient(serverCA, clientCA.clientCert(t, "kube-apiserver"))
	h2c.Transport.(*http.Transport).ForceAttemptHTTP2 = true
	resp, err = h2c.Post(url+"/audit", "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, "HTTP/2.0", resp.Proto)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	probe.called.Store(0)

	// A certificate of another CA fails the handshake (or is refused).
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/audit", strings.NewReader("{}"))
	require.NoError(t, err)
	if resp, err := httpsClient(serverCA, otherCA.clientCert(t, "intruder")).Do(req); err == nil {
		resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	}
	assert.Zero(t, probe.called.Load())

	code, body := do(t, httpsClient(serverCA, clientCA.clientCert(t, "kube-apiserver")), http.MethodPost, url+"/audit", "", nil, strings.NewReader("{}"))
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "accepted", body)
	assert.Equal(t, int32(1), probe.called.Load())

	code, body = do(t, httpsClient(serverCA), http.MethodGet, url+"/healthz", "", nil, nil)
	assert.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"status":"ok"}`, body, "probes learn nothing else")
	code, body = do(t, httpsClient(serverCA, clientCA.clientCert(t, "kube-apiserver")), http.MethodGet, url+"/healthz", "", nil, nil)
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "/secret/path", "authenticated clients get the full health")
}

// A large unauthenticated body is not read: the 401 comes back while the client is still
// sending, and the connection is closed.
func TestAuditRejectsWithoutReadingBody(t *testing.T) {
	dir := t.TempDir()
	var probe bodyProbe
	s := startServers(t, Config{AuditAddr: "127.0.0.1:0", AuditAuth: AuditAuthConfig{TokenFiles: []string{writeFile(t, dir, "tokens", []byte("secret\n"))}}},
		[]Handler{probe.handler()}, nil, nil, nil)
	var read atomic.Int64
	body := &countingReader{n: &read, left: 64 << 20}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+s.AuditAddr()+"/audit", body)
	require.NoError(t, err)
	req.ContentLength = 64 << 20
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	}
	assert.Less(t, read.Load(), int64(16<<20), "the client was not made to send its whole body")
	assert.Zero(t, probe.called.Load())
}

type countingReader struct {
	n    *atomic.Int64
	left int64
}

func (r *countingReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, io.EOF
	}
	n := int64(len(p))
	if n > r.left {
		n = r.left
	}
	r.left -= n
	r.n.Add(n)
	return int(n), nil
}

// Bearer tokens from token files, re-read when the files change.
func TestAuditTokenFile(t *testing.T) {
	dir := t.TempDir()
	tokens := writeFile(t, dir, "tokens", []byte("# kube-apiserver\nfirst-token\n\n"))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	var probe bodyProbe
	s := startServers(t, Config{AuditAddr: "127.0.0.1:0", ReloadInterval: 20 * time.Millisecond,
		AuditAuth: AuditAuthConfig{TokenFiles: []string{tokens}}}, []Handler{probe.handler()}, nil, nil, mp)
	url := "http://" + s.AuditAddr() + "/audit"
	c := &http.Client{Timeout: 5 * time.Second}

	code, _ := do(t, c, http.MethodPost, url, "", nil, strings.NewReader("{}"))
	assert.Equal(t, http.StatusUnauthorized, code)
	code, _ = do(t, c, http.MethodPost, url, "wrong", nil, strings.NewReader("{}"))
	assert.Equal(t, http.StatusUnauthorized, code)
	code, _ = do(t, c, http.MethodPost, url, "first-toke", nil, strings.NewReader("{}"))
	assert.Equal(t, http.StatusUnauthorized, code, "a prefix is not the token")
	code, _ = do(t, c, http.MethodPost, url, "# kube-apiserver", nil, strings.NewReader("{}"))
	assert.Equal(t, http.StatusUnauthorized, code, "comments are not tokens")
	assert.Equal(t, int64(3), rejectedCount(t, reader, "audit", "invalid"))
	assert.Equal(t, int64(1), rejectedCount(t, reader, "audit", "missing"))
	code, _ = do(t, c, http.MethodPost, url, "first-token", nil, strings.NewReader("{}"))
	assert.Equal(t, http.StatusOK, code)

	require.NoError(t, os.WriteFile(tokens, []byte("second-token\n"), 0o600))
	require.Eventually(t, func() bool {
		code, _ := do(t, c, http.MethodPost, url, "second-token", nil, strings.NewReader("{}"))
		return code == http.StatusOK
	}, 5*time.Second, 30*time.Millisecond)
	code, _ = do(t, c, http.MethodPost, url, "first-token", nil, strings.NewReader("{}"))
	assert.Equal(t, http.StatusUnauthorized, code, "a removed token no longer passes")
}

// apiRoutes imitates the API listener's routes: data under /api, /metrics, UI pages.
func apiRoutes(users chan<- string) []Handler {
	return []Handler{
		Route("GET /api/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			users <- user(r.Context()) + "|" + r.Header.Get("X-Forwarded-User")
			_, _ = io.WriteString(w, "data")
		})),
		Route("GET /metrics", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "metrics") })),
		Route("GET /static/", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "js") })),
		Route("GET /trace/{id}", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "page") })),
	}
}

// The API takes a bearer token; the UI's pages and static files stay open, its data and
// /metrics do not.
func TestAPIToken(t *testing.T) {
	dir := t.TempDir()
	users := make(chan string, 10)
	s := startServers(t, Config{APIAddr: "127.0.0.1:0", APIAuth: APIAuthConfig{TokenFiles: []string{writeFile(t, dir, "tokens", []byte("reader-token\n"))}}},
		nil, apiRoutes(users), secretHealth, nil)
	url := "http://" + s.APIAddr()
	c := &http.Client{Timeout: 5 * time.Second}
	for _, p := range []string{"/api/traces", "/metrics"} {
		code, _ := do(t, c, http.MethodGet, url+p, "", nil, nil)
		assert.Equal(t, http.StatusUnauthorized, code, p)
		code, _ = do(t, c, http.MethodGet, url+p, "reader-token", nil, nil)
		assert.Equal(t, http.StatusOK, code, p)
	}
	assert.Equal(t, "|", <-users)
	for _, p := range []string{"/static/app.js", "/trace/abc"} {
		code, _ := do(t, c, http.MethodGet, url+p, "", nil, nil)
		assert.Equal(t, http.StatusOK, code, p)
	}
	// A forged user header from a client that is not the proxy counts for nothing.
	code, _ := do(t, c, http.MethodGet, url+"/api/traces", "", map[string]string{"X-Forwarded-User": "admin"}, nil)
	assert.Equal(t, http.StatusUnauthorized, code)
	code, _ = do(t, c, http.MethodGet, url+"/api/traces", "reader-token", map[string]string{"X-Forwarded-User": "admin"}, nil)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "|", <-users, "the forged header is removed before the handler")
	code, body := do(t, c, http.MethodGet, url+"/healthz", "", nil, nil)
	assert.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"status":"ok"}`, body)
}

// Behind an authenticating proxy: the user header is believed only from a client with the
// proxy's certificate (of the proxy CA, with an allowed name).
func TestAPIAuthProxy(t *testing.T) {
	dir := t.TempDir()
	serverCA, proxyCA := newTestCA(t, "server-ca"), newTestCA(t, "proxy-ca")
	users := make(chan string, 10)
	s := startServers(t, Config{APIAddr: "127.0.0.1:0", APITLS: serverFiles(t, serverCA, dir),
		APIAuth: APIAuthConfig{Proxy: ProxyAuthConfig{ClientCAFile: writeFile(t, dir, "proxy-ca.crt", proxyCA.pem), AllowedNames: []string{"oauth2-proxy"}}}},
		nil, apiRoutes(users), nil, nil)
	url := "https://" + s.APIAddr() + "/api/traces"
	alice := map[string]string{"X-Forwarded-User": "alice"}

	code, _ := do(t, httpsClient(serverCA), http.MethodGet, url, "", alice, nil)
	assert.Equal(t, http.StatusUnauthorized, code, "header without the proxy's certificate")
	code, _ = do(t, httpsClient(serverCA, proxyCA.clientCert(t, "someone-else")), http.MethodGet, url, "", alice, nil)
	assert.Equal(t, http.StatusUnauthorized, code, "certificate of the proxy CA, but not an allowed name")
	code, _ = do(t, httpsClient(serverCA, proxyCA.clientCert(t, "oauth2-proxy")), http.MethodGet, url, "", nil, nil)
	assert.Equal(t, http.StatusUnauthorized, code, "the proxy named no user")
	code, _ = do(t, httpsClient(serverCA, proxyCA.clientCert(t, "oauth2-proxy")), http.MethodGet, url, "", alice, nil)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "alice|alice", <-users)
	code, _ = do(t, httpsClient(serverCA, proxyCA.clientCert(t, "oauth2-proxy")), http.MethodGet, url, "", map[string]string{"X-Auth-Request-User": "bob"}, nil)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "bob|", <-users)
}

// Validate names the setting and the problem.
func TestValidateSecurity(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "ca")
	good := serverFiles(t, ca, dir)
	caFile := writeFile(t, dir, "ca.crt", ca.pem)
	empty := writeFile(t, dir, "empty", []byte("# nothing\n"))
	missing := dir + "/missing"
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"cert without key", Config{AuditTLS: TLSConfig{CertFile: good.CertFile}}, "auditTLS: certFile and keyFile must be set together"},
		{"missing cert", Config{APITLS: TLSConfig{CertFile: missing, KeyFile: good.KeyFile}}, "httpTLS: certificate " + missing},
		{"client CA without TLS", Config{AuditAuth: AuditAuthConfig{ClientCAFile: caFile}}, "auditAuth: clientCAFile needs TLS"},
		{"missing client CA", Config{AuditTLS: good, AuditAuth: AuditAuthConfig{ClientCAFile: missing}}, "auditAuth: clientCAFile: read CA file"},
		{"CA file without certificates", Config{AuditTLS: good, AuditAuth: AuditAuthConfig{ClientCAFile: empty}}, "holds no PEM certificate"},
		{"missing token file", Config{APIAuth: APIAuthConfig{TokenFiles: []string{missing}}}, "httpAuth: tokenFiles: read token file"},
		{"empty token file", Config{AuditAuth: AuditAuthConfig{TokenFiles: []string{empty}}}, "holds no token"},
		{"proxy headers without CA", Config{APIAuth: APIAuthConfig{Proxy: ProxyAuthConfig{UserHeaders: []string{"X-User"}}}}, "need proxy.clientCAFile"},
		{"proxy CA without TLS", Config{APIAuth: APIAuthConfig{Proxy: ProxyAuthConfig{ClientCAFile: caFile}}}, "proxy.clientCAFile needs TLS"},
		{"shared listener", Config{AuditAddr: ":1", APIAddr: ":1", AuditTLS: good}, "auditTLS and auditAuth need their own listener"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			_, err = New(tc.cfg, Deps{Logger: quiet, Audit: []Handler{Route("POST /audit", http.NotFoundHandler())}})
			require.Error(t, err, "New refuses it too")
		})
	}
	require.NoError(t, Config{AuditTLS: good, AuditAuth: AuditAuthConfig{ClientCAFile: caFile}, APITLS: good,
		APIAuth: APIAuthConfig{Proxy: ProxyAuthConfig{ClientCAFile: caFile}}}.Validate())
}

// An unauthenticated listener on the network is worth a warning; on loopback it is the default.
func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:8080": true, "localhost:1": true, "[::1]:2": true, ":8080": false, "0.0.0.0:1": false, "10.0.0.1:1": false, "bad": false} {
		assert.Equal(t, want, loopback(addr), addr)
	}
}

// GET /livez answers 200 on every listener while /healthz says the process cannot take writes,
// with or without credentials: a liveness probe on it does not restart a process that recovers
// by itself.
func TestLivezWhileUnhealthy(t *testing.T) {
	unhealthy := Health(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":"unavailable","reason":"disk full"}`))
	}))
	dir := t.TempDir()
	token := writeFile(t, dir, "tokens", []byte("reader-token\n"))
	for name, cfg := range map[string]Config{
		"open":          {AuditAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0"},
		"authenticated": {AuditAddr: "127.0.0.2:0", APIAddr: "127.0.0.1:0", APIAuth: APIAuthConfig{TokenFiles: []string{token}}, AuditAuth: AuditAuthConfig{TokenFiles: []string{token}}},
	} {
		t.Run(name, func(t *testing.T) {
			s := startServers(t, cfg, []Handler{HandlerFunc(func(*http.ServeMux) {})}, apiRoutes(make(chan string, 10)), unhealthy, nil)
			c := &http.Client{Timeout: 5 * time.Second}
			for _, addr := range []string{s.APIAddr(), s.AuditAddr()} {
				code, body := do(t, c, http.MethodGet, "http://"+addr+"/livez", "", nil, nil)
				assert.Equal(t, http.StatusOK, code, addr)
				assert.JSONEq(t, `{"status":"alive"}`, body)
				code, _ = do(t, c, http.MethodGet, "http://"+addr+"/healthz", "reader-token", nil, nil)
				assert.Equal(t, http.StatusServiceUnavailable, code, "/healthz tells the truth to an authenticated caller")
			}
		})
	}
}

package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/audit/consumer"
	"github.com/kelemetry/kelemetry/audit/webhook"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/audit/queue"
	"github.com/kelemetry/kelemetry/kube"
	"github.com/kelemetry/kelemetry/linker"
	"github.com/kelemetry/kelemetry/store/pebble"
	"github.com/kelemetry/kelemetry/telemetry"
)

// TestMain fails the package's tests when a goroutine outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var (
	rolloutBatches = filepath.Join("..", "..", "testdata", "rollout", "webhook-batches.jsonl")
	rolloutLog     = filepath.Join("..", "..", "testdata", "rollout", "audit.jsonl")
)

// slowSink delays every export, so that a tiny queue fills and the webhook answers 429.
type slowSink struct{ delay time.Duration }

func (s slowSink) Export(context.Context, []*aggregator.Span) error {
	time.Sleep(s.delay) // the slow sink under test (not a wait): the queue fills behind it
	return nil
}

// server is the real pipeline: webhook -> queue -> consumer -> aggregator (built-in linkers) ->
// Pebble store, with its metrics on /metrics.
type server struct {
	webhook, metrics http.Handler
	code429          atomic.Int64
}

func newServer(t *testing.T, qcfg queue.Config, delay time.Duration) *server {
	t.Helper()
	ctx := context.Background()
	prom, err := telemetry.NewPrometheus()
	require.NoError(t, err)
	tel := telemetry.Settings{MeterProvider: prom.Provider, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	st, err := pebble.Open(ctx, pebble.Config{Dir: t.TempDir()}, 0, tel)
	require.NoError(t, err)
	engine, err := aggregator.New(aggregator.Config{}, aggregator.Deps{
		Telemetry: tel,
		Sinks:     []aggregator.Sink{st, slowSink{delay}},
		Linkers: []aggregator.Linker{
			linker.NewOwnerLinker(kube.NewStaticMapper(), nil, tel),
			linker.NewAnnotationLinker(nil, tel),
		},
	})
	require.NoError(t, err)
	require.NoError(t, engine.Start(ctx))
	consumer, err := consumer.New(consumer.Config{}, consumer.Deps{Aggregator: engine, Telemetry: tel})
	require.NoError(t, err)
	q, err := queue.New(qcfg, queue.Deps{Handle: consumer.Handle, Telemetry: tel})
	require.NoError(t, err)
	require.NoError(t, q.Start(ctx))
	mux := http.NewServeMux()
	webhook.New(webhook.Config{}, webhook.Deps{Queue: q, Telemetry: tel}).Register(mux)
	s := &server{metrics: prom.Handler}
	s.webhook = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		mux.ServeHTTP(rec, r)
		if rec.code == http.StatusTooManyRequests {
			s.code429.Add(1)
		}
	})
	t.Cleanup(func() {
		_ = q.Stop(ctx)
		_ = engine.Stop(ctx)
		_ = st.Stop(context.Background())
		_ = prom.Shutdown(ctx)
	})
	return s
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

func countEvents(t *testing.T, path string, size int) (int, int) {
	t.Helper()
	bs, err := readBatches(path, size)
	require.NoError(t, err)
	n, largest := 0, 0
	for _, b := range bs {
		n += b.events
		largest = max(largest, b.events)
	}
	return n, largest
}

func reported(t *testing.T, out, label string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(label) + `\s+(\d+)`).FindStringSubmatch(out)
	require.NotNil(t, m, "%q not in output:\n%s", label, out)
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return n
}

// TestAllEventsAcceptedDespite429: a queue that holds one batch and a slow sink make the webhook
// answer 429; the tool waits for Retry-After and posts the same batch again until every event is
// accepted, and reports the spans the server stored.
func TestAllEventsAcceptedDespite429(t *testing.T) {
	events, largest := countEvents(t, rolloutBatches, 400)
	s := newServer(t, queue.Config{Capacity: largest, Partitions: 1}, 2*time.Millisecond)
	hook := httptest.NewServer(s.webhook)
	defer hook.Close()
	metrics := httptest.NewServer(s.metrics)
	defer metrics.Close()

	var out bytes.Buffer
	err := run(context.Background(), []string{"--url", hook.URL + "/audit/load", "--workers", "4", "--repeat", "2",
		"--metrics-url", metrics.URL, "--settle", "30s", rolloutBatches}, &out)
	require.NoError(t, err, out.String())
	t.Log(out.String())
	assert.Positive(t, s.code429.Load(), "the tiny queue refused batches")
	assert.Regexp(t, `events accepted\s+`+strconv.Itoa(2*events)+` of `+strconv.Itoa(2*events), out.String())
	assert.Regexp(t, `[1-9]\d* retried after 429`, out.String())
	assert.Contains(t, out.String(), "0 failed")
	stored := reported(t, out.String(), "spans stored")
	assert.Equal(t, reported(t, out.String(), "spans to sinks"), stored)
	assert.Positive(t, stored)
	// The second posting of an event is answered 200 by the webhook's repeat check and not
	// queued (unless both postings were in flight at once): every accepted event is either
	// handled by the consumer or skipped as a repeat.
	assert.Positive(t, reported(t, out.String(), "repeats skipped"))
	assert.Equal(t, 2*events, reported(t, out.String(), "consumer events")+reported(t, out.String(), "repeats skipped"))
}

// TestAuditLogIntoBatches: a log-backend audit log is cut into batches of --batch events.
func TestAuditLogIntoBatches(t *testing.T) {
	events, _ := countEvents(t, rolloutLog, 1)
	bs, err := readBatches(rolloutLog, 50)
	require.NoError(t, err)
	require.Len(t, bs, (events+49)/50)
	for _, b := range bs[:len(bs)-1] {
		assert.Equal(t, 50, b.events)
		evs, err := auditv1.DecodeEventList(b.body)
		require.NoError(t, err)
		assert.Len(t, evs, 50)
	}

	s := newServer(t, queue.Config{}, 0)
	hook := httptest.NewServer(s.webhook)
	defer hook.Close()
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"--url", hook.URL + "/audit/load", "--batch", "50", rolloutLog}, &out), out.String())
	assert.Regexp(t, `events accepted\s+`+strconv.Itoa(events)+` of `+strconv.Itoa(events)+` \(`+strconv.Itoa(len(bs))+` batches`, out.String())
}

// TestHTTPSClientCertAndToken: over TLS, with a client certificate and a bearer token.
func TestHTTPSClientCertAndToken(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, cert := writeCert(t, dir)
	tokenFile := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600))

	s := newServer(t, queue.Config{}, 0)
	hook := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" || r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		s.webhook.ServeHTTP(w, r)
	}))
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	hook.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12}
	hook.StartTLS()
	defer hook.Close()
	caFile := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hook.Certificate().Raw}), 0o600))

	events, _ := countEvents(t, rolloutBatches, 400)
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"--url", hook.URL + "/audit/load", "--ca-file", caFile,
		"--cert", certFile, "--key", keyFile, "--token-file", tokenFile, rolloutBatches}, &out), out.String())
	assert.Regexp(t, `events accepted\s+`+strconv.Itoa(events)+` of `, out.String())

	// Without the token: refused, reported as failed.
	out.Reset()
	err := run(context.Background(), []string{"--url", hook.URL + "/audit/load", "--ca-file", caFile,
		"--cert", certFile, "--key", keyFile, rolloutBatches}, &out)
	require.ErrorContains(t, err, "401")
	assert.Regexp(t, `events accepted\s+0 of`, out.String())
}

// writeCert writes a self-signed client certificate and its key.
func writeCert(t *testing.T, dir string) (string, string, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "auditload"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	kb, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
	return certFile, keyFile, cert
}

// TestServerProcessStats: the CPU time and peak RSS of a process listening on the URL's port (this
// test's own) are found and printed.
func TestServerProcessStats(t *testing.T) {
	s := newServer(t, queue.Config{}, 0)
	hook := httptest.NewServer(s.webhook)
	defer hook.Close()
	pid, err := pidListening(mustPort(t, hook.URL))
	require.NoError(t, err)
	assert.Equal(t, os.Getpid(), pid)
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"--url", hook.URL + "/audit/load", rolloutBatches}, &out), out.String())
	assert.Regexp(t, `server pid `+strconv.Itoa(os.Getpid())+`\s+\d+\.\d+ CPU-seconds, \d+ events per CPU-second, peak RSS [1-9]\d* MiB`, out.String())
}

func mustPort(t *testing.T, u string) int {
	t.Helper()
	m := regexp.MustCompile(`:(\d+)$`).FindStringSubmatch(u)
	require.NotNil(t, m)
	p, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return p
}

func TestMetricSum(t *testing.T) {
	text := "# HELP x\nkelemetry_aggregator_spans_total{kind=\"event\"} 10\nkelemetry_aggregator_spans_total{kind=\"link\"} 5\n" +
		"kelemetry_aggregator_spans_other 7\nkelemetry_audit_queue_depth 3\n"
	v, ok := metricSum(text, "kelemetry_aggregator_spans")
	assert.True(t, ok)
	assert.InDelta(t, 15.0, v, 0)
	v, ok = metricSum(text, "kelemetry_audit_queue_depth")
	assert.True(t, ok)
	assert.InDelta(t, 3.0, v, 0)
	_, ok = metricSum(text, "kelemetry_store_spans_written")
	assert.False(t, ok)
}

func TestFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{rolloutBatches},
		{"--url", "http://x/audit"},
		{"--url", "http://x/audit", "--workers", "0", rolloutBatches},
		{"--url", "http://x/audit", "--cert", "c.pem", rolloutBatches},
		{"--url", "http://x/audit", "--rate", "-1", rolloutBatches},
		{"--url", "http://x/audit", "--duration", "-1s", rolloutBatches},
	} {
		var out bytes.Buffer
		assert.Error(t, run(context.Background(), args, &out), "%v", args)
	}
}

// Batches go to the URLs in turn, each as the next simulated cluster.
func TestPosterTargets(t *testing.T) {
	p := &poster{urls: []string{"http://a/audit/c", "http://b/audit/c/"}, clusters: 3}
	var got []string
	for k := range int64(6) {
		got = append(got, p.target(k))
	}
	assert.Equal(t, []string{"http://a/audit/c-0", "http://b/audit/c-1", "http://a/audit/c-2",
		"http://b/audit/c-0", "http://a/audit/c-1", "http://b/audit/c-2"}, got)
	one := &poster{urls: []string{"http://a/audit/c"}, clusters: 1}
	assert.Equal(t, "http://a/audit/c", one.target(5))
}

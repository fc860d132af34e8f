package e2e_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestWebhookTLSClientCert: kube-apiserver posts its audit batches to the all-in-one over TLS
// with a client certificate (the harness's secure setup), which the all-in-one requires: its
// webhook has accepted events, and a client without the certificate gets 401.
func TestWebhookTLSClientCert(t *testing.T) {
	needEnv(t)
	aio := env.Kelemetry
	if aio.AuditTLS == nil || !strings.HasPrefix(aio.AuditURL, "https://") {
		t.Fatalf("the webhook is not served over TLS: %s", aio.AuditURL)
	}
	newNamespace(t, "webhook-tls") // a write that kube-apiserver audits
	deadline := time.Now().Add(30 * time.Second)
	for {
		if n := metricSum(t, aio.URL+"/metrics", "kelemetry_audit_webhook_events"); n > 0 {
			t.Logf("events accepted over TLS from kube-apiserver: %v", n)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the webhook accepted no event from kube-apiserver over TLS within 30s")
		}
		time.Sleep(200 * time.Millisecond)
	}

	ca, err := os.ReadFile(aio.AuditTLS.ClientCAFile) // the same CA signed the serving certificate
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	resp, err := c.Post(aio.AuditURL, "application/json", strings.NewReader(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a client without a certificate got %d, want 401", resp.StatusCode)
	}
	if n := metricSum(t, aio.URL+"/metrics", "kelemetry_http_auth_rejected"); n < 1 {
		t.Fatalf("kelemetry_http_auth_rejected = %v, want >= 1", n)
	}
}

// metricSum adds up the samples of a Prometheus metric family (name prefix, any labels).
func metricSum(t *testing.T, url, name string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kelemetry/kelemetry/e2e/bins"
	"github.com/kelemetry/kelemetry/e2e/cluster"
	"github.com/kelemetry/kelemetry/e2e/internal/proc"
	"github.com/kelemetry/kelemetry/e2e/kapi"
)

// webhookDelay is how long the test's admission webhook holds every Pod create.
const webhookDelay = 1500 * time.Millisecond

// envRecordTraces, set to a folder, writes the scenario's audit log and kube-apiserver's request
// spans there (the fixture testdata/apiserver-traces is made so).
const envRecordTraces = "KELEMETRY_E2E_RECORD_TRACES"

// delayWebhook is a validating admission webhook that allows everything and waits webhookDelay
// on Pod creates.
func delayWebhook(t *testing.T, files cluster.TLSFiles) (url string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
			return
		}
		if review.Request.Kind.Kind == "Pod" && review.Request.Operation == admissionv1.Create {
			select {
			case <-time.After(webhookDelay):
			case <-r.Context().Done():
				return
			}
		}
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		review.Request = nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(review)
	})}
	go func() { _ = srv.ServeTLS(ln, files.ServerCert, files.ServerKey) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "https://" + ln.Addr().String() + "/validate"
}

// TestAPIServerTraces runs kube-apiserver with tracing on (every request sampled, spans to the
// all-in-one's OTLP receiver) and a validating admission webhook that takes 1.5 s on every Pod
// create: each Pod create's event span gets kube-apiserver's spans under it, among them the
// webhook call of about 1.5 s, and the Deployment's critical path names the webhook as the slow
// part of its slowest request.
func TestAPIServerTraces(t *testing.T) {
	binDir, err := bins.Dir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(binDir, bins.KubeAPIServer)); err != nil {
		if os.Getenv(envRequire) == "1" {
			t.Fatalf("binaries missing in %s: %v", binDir, err)
		}
		t.Skipf("binaries missing in %s (go run ./cmd/buildbins)", binDir)
	}
	dir := t.TempDir()
	otlpPort, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	tracing := filepath.Join(dir, "tracing.yaml")
	if err := os.WriteFile(tracing, []byte(fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: TracingConfiguration
endpoint: %s
samplingRatePerMillion: 1000000
`, proc.HostPort(otlpPort))), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "webhook-tls"), 0o700); err != nil {
		t.Fatal(err)
	}
	tlsFiles, err := cluster.WriteTLSFiles(filepath.Join(dir, "webhook-tls"))
	if err != nil {
		t.Fatal(err)
	}
	hookURL := delayWebhook(t, tlsFiles)
	dump := filepath.Join(dir, "apiserver-spans.jsonl")
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	e, err := cluster.StartEnv(t.Context(), cluster.EnvOptions{
		BinDir: binDir, ClusterName: clusterName, Nodes: 1, WorkDir: filepath.Join(dir, "env"), KeepWorkDir: true, Logger: logger,
		APIServerArgs: []string{"--tracing-config-file=" + tracing},
		AllInOneArgs: []string{"--apiserver-traces", "--otlp-addr=" + proc.HostPort(otlpPort),
			"--set", "apiserverTraces.dump=" + dump},
	})
	if err != nil {
		t.Fatalf("start the traced environment: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.Stop(ctx); err != nil {
			t.Errorf("stop the traced environment: %v", err)
		}
	})
	kc, api := e.Cluster.Client, kapi.New(e.Kelemetry.URL)
	ctx := t.Context()
	poll := func(what string, check func(ctx context.Context) error) {
		t.Helper()
		pollUntil(t, clusterTimeout, what, e.Healthy, check)
	}

	const ns = "traced"
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"kelemetry-e2e/delay": "true"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(tlsFiles.CA)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kc.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "delay"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "delay.e2e.kelemetry.dev",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &hookURL, CABundle: caPEM},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kelemetry-e2e/delay": "true"}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](10),
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll("the default ServiceAccount", func(ctx context.Context) error {
		_, err := kc.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	start := time.Now()
	labels := map[string]string{"app": "web"}
	if _, err := kc.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pods []string
	poll("3 Pods of the Deployment", func(ctx context.Context) error {
		list, err := kc.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		pods = pods[:0]
		for _, p := range list.Items {
			pods = append(pods, p.Name)
		}
		if len(pods) != 3 {
			return fmt.Errorf("%d Pods", len(pods))
		}
		return nil
	})
	slices.Sort(pods)

	// Each Pod create has kube-apiserver's spans under its event span, the webhook call among
	// them, of about webhookDelay.
	for _, pod := range pods {
		poll("the webhook span under the create of "+pod, func(ctx context.Context) error {
			ot, err := api.ObjectTraces(ctx, kapi.Query{Cluster: clusterName, Resource: "pods", Namespace: ns, Name: pod})
			if err != nil {
				return err
			}
			byID := map[string]kapi.Span{}
			for _, s := range ot.Spans("") {
				byID[s.SpanID] = s
			}
			var create *kapi.Span
			for _, s := range ot.Spans("event") {
				if s.Tag("kelemetry.audit.verb") == "create" && s.Tag("kelemetry.audit.subresource") == "" {
					create = &s
				}
			}
			if create == nil {
				return fmt.Errorf("no create event of %s", pod)
			}
			var names []string
			for _, s := range ot.Spans("request") {
				names = append(names, s.OperationName)
				if s.OperationName != "Call validating webhook" || s.Tag("webhook") != "delay.e2e.kelemetry.dev" {
					continue
				}
				d := time.Duration(s.Duration) * time.Microsecond
				if d < webhookDelay-50*time.Millisecond || d > webhookDelay+2*time.Second {
					return fmt.Errorf("the webhook span of %s took %s", pod, d)
				}
				// Its ancestry ends at the create's event span.
				cur := s
				for range 16 {
					if len(cur.References) == 0 {
						break
					}
					p, ok := byID[cur.References[0].SpanID]
					if !ok {
						return fmt.Errorf("the parent of %s is not stored", cur.OperationName)
					}
					if p.SpanID == create.SpanID {
						return nil
					}
					cur = p
				}
				return fmt.Errorf("the webhook span of %s is not under its create event", pod)
			}
			return fmt.Errorf("no webhook span among the request spans of %s: %v", pod, names)
		})
	}

	// The Deployment's critical path names the webhook.
	q := url.Values{
		"service": {"tracing [full tree]"},
		"tags":    {fmt.Sprintf(`{"cluster":%q,"resource":"deployments","namespace":%q,"name":"web"}`, clusterName, ns)},
		"start":   {strconv.FormatInt(start.Add(-time.Minute).UnixMicro(), 10)},
		"end":     {strconv.FormatInt(time.Now().Add(time.Minute).UnixMicro(), 10)},
	}
	poll("the critical path names the webhook", func(ctx context.Context) error {
		var found struct {
			Data []struct {
				TraceID string `json:"traceID"`
			} `json:"data"`
		}
		if err := getAPIJSON(ctx, e.Kelemetry.URL+"/api/traces?"+q.Encode(), &found); err != nil {
			return err
		}
		if len(found.Data) != 1 {
			return fmt.Errorf("%d traces of the Deployment", len(found.Data))
		}
		var ans struct {
			Data struct {
				SlowestRequest *struct {
					Controller      string  `json:"controller"`
					Verb            string  `json:"verb"`
					SlowPart        string  `json:"slowPart"`
					SlowPartSeconds float64 `json:"slowPartSeconds"`
					ActSeconds      float64 `json:"actSeconds"`
				} `json:"slowestRequest"`
			} `json:"data"`
		}
		if err := getAPIJSON(ctx, e.Kelemetry.URL+"/api/critical-path/"+found.Data[0].TraceID, &ans); err != nil {
			return err
		}
		s := ans.Data.SlowestRequest
		if s == nil {
			return fmt.Errorf("no slowest request on the path")
		}
		if s.SlowPart != "validating webhook delay.e2e.kelemetry.dev" || s.SlowPartSeconds < webhookDelay.Seconds()-0.05 {
			return fmt.Errorf("slowest request: %s %s took %.3fs, slow part %q %.3fs", s.Controller, s.Verb, s.ActSeconds, s.SlowPart, s.SlowPartSeconds)
		}
		t.Logf("critical path: slowest request %s %s took %.3fs, %s %.3fs", s.Controller, s.Verb, s.ActSeconds, s.SlowPart, s.SlowPartSeconds)
		return nil
	})

	if out := os.Getenv(envRecordTraces); out != "" {
		recordTraces(t, e, ns, dump, out)
	}
}

// recordTraces writes the audit events of namespace ns and kube-apiserver's spans of their
// requests to out: audit.jsonl and apiserver-spans.jsonl.
func recordTraces(t *testing.T, e *cluster.Env, ns, dump, out string) {
	t.Helper()
	// Let kube-apiserver flush its last spans and audit batches.
	time.Sleep(6 * time.Second)
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	var audit bytes.Buffer
	forEachLine(t, e.Cluster.AuditLog, func(line []byte) {
		var ev struct {
			AuditID   string `json:"auditID"`
			ObjectRef *struct {
				Namespace string `json:"namespace"`
			} `json:"objectRef"`
		}
		if json.Unmarshal(line, &ev) != nil || ev.ObjectRef == nil || ev.ObjectRef.Namespace != ns {
			return
		}
		ids[ev.AuditID] = true
		audit.Write(line)
		audit.WriteByte('\n')
	})
	var spans bytes.Buffer
	forEachLine(t, dump, func(line []byte) {
		if kept := keepRequests(line, ids); kept != nil {
			spans.Write(kept)
			spans.WriteByte('\n')
		}
	})
	if err := os.WriteFile(filepath.Join(out, "audit.jsonl"), audit.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "apiserver-spans.jsonl"), spans.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %d audit events and their request spans in %s", len(ids), out)
}

// keepRequests keeps, of one OTLP/JSON trace request, the spans of traces in which a span carries
// one of the audit IDs; nil when none is left.
func keepRequests(line []byte, ids map[string]bool) []byte {
	type kv struct {
		Key   string `json:"key"`
		Value struct {
			StringValue string `json:"stringValue"`
		} `json:"value"`
	}
	var req struct {
		ResourceSpans []struct {
			Resource   json.RawMessage `json:"resource"`
			ScopeSpans []struct {
				Scope json.RawMessage   `json:"scope"`
				Spans []json.RawMessage `json:"spans"`
			} `json:"scopeSpans"`
		} `json:"resourceSpans"`
	}
	if json.Unmarshal(line, &req) != nil {
		return nil
	}
	traces := map[string]bool{}
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, raw := range ss.Spans {
				var sp struct {
					TraceID    string `json:"traceId"`
					Attributes []kv   `json:"attributes"`
				}
				_ = json.Unmarshal(raw, &sp)
				for _, a := range sp.Attributes {
					if a.Key == "audit-id" && ids[a.Value.StringValue] {
						traces[sp.TraceID] = true
					}
				}
			}
		}
	}
	if len(traces) == 0 {
		return nil
	}
	n := 0
	for i := range req.ResourceSpans {
		for j := range req.ResourceSpans[i].ScopeSpans {
			ss := &req.ResourceSpans[i].ScopeSpans[j]
			ss.Spans = slices.DeleteFunc(ss.Spans, func(raw json.RawMessage) bool {
				var sp struct {
					TraceID string `json:"traceId"`
				}
				_ = json.Unmarshal(raw, &sp)
				return !traces[sp.TraceID]
			})
			n += len(ss.Spans)
		}
	}
	if n == 0 {
		return nil
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil
	}
	return []byte(strings.TrimSpace(string(b)))
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/goleak"
	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kelemetry/kelemetry"
	"github.com/kelemetry/kelemetry/httpserver"
	"github.com/kelemetry/kelemetry/internal/logtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// kelemetryServer runs a real all-in-one (the bundle, memory store) that replayed the recorded
// rollout, and returns its API's URL once everything is stored.
func kelemetryServer(t *testing.T) string {
	t.Helper()
	cfg := kelemetry.Config{Cluster: "test", AuditAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0"}
	cfg.Audit.Replay = []string{filepath.Join("..", "..", "testdata", "rollout", "audit.jsonl")}
	var servers *httpserver.Servers
	app := fx.New(kelemetry.Module, fx.Supply(cfg, slog.New(slog.DiscardHandler)), fx.Populate(&servers), fx.NopLogger)
	require.NoError(t, app.Err())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, app.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = app.Stop(ctx)
	})
	base := "http://" + servers.APIAddr()
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var h struct {
			Replay     struct{ Done bool } `json:"replay"`
			QueueDepth int                 `json:"queueDepth"`
			LinkJobs   int                 `json:"linkJobs"`
		}
		return json.NewDecoder(resp.Body).Decode(&h) == nil && h.Replay.Done && h.QueueDepth == 0 && h.LinkJobs == 0
	}, 60*time.Second, 20*time.Millisecond)
	return base
}

func plugin(t *testing.T, args ...string) (string, error) {
	t.Helper()
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, &out, &errOut)
	return out.String(), err
}

// The plugin against a running Kelemetry: the tree of the rollout, the critical path, the UI's
// link, the object at a moment, and one clear line for each mistake.
func TestPluginAgainstAllInOne(t *testing.T) {
	server := kelemetryServer(t)
	since := "--since=" + time.Since(time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)).Round(time.Hour).String()

	out, err := plugin(t, "trace", "deployment/demo", "--server", server, since)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.Greater(t, len(lines), 10, out)
	assert.Regexp(t, `^\s+OBJECT\s+START\s+DURATION\s+EVENTS\s+FAILED\s+LAST EVENT$`, lines[0])
	assert.Regexp(t, `^\* deployments/demo\s+\+0ms\s`, lines[1], "the root, on the critical path")
	assert.Contains(t, out, "├─ replicasets/demo-")
	assert.Contains(t, out, "│  ├─ pods/demo-", "the pods under their ReplicaSet")
	assert.Contains(t, out, "└─ replicasets/demo-")
	assert.Contains(t, out, "* on the critical path:")
	assert.NotContains(t, out, "\x1b[", "no colour off a terminal")
	// Short names and the kind's name resolve without discovery, and colour can be forced.
	coloured, err := plugin(t, "trace", "deploy", "demo", "--server", server, since, "--color=always", "-n", "default")
	require.NoError(t, err)
	assert.Contains(t, coloured, yellow+"* deployments/demo")

	out, err = plugin(t, "trace", "deployments.apps/demo", "--server", server, since, "--mode", "critical")
	require.NoError(t, err)
	lines = strings.Split(out, "\n")
	assert.Regexp(t, `^AT\s+WAIT\s+TOOK\s+OBJECT\s+BY\s+VERB\s+RULE$`, lines[0])
	assert.Regexp(t, `^\+0ms\s+0ms\s+\S+\s+deployments/demo\s+admin\s+create\s+start$`, lines[1])
	assert.Regexp(t, `\n\d+ steps, \S+ in all\n$`, out)

	out, err = plugin(t, "open", "deployment/demo", "--server", server, "--time", "2026-11-29T17:09:40Z")
	require.NoError(t, err)
	link := strings.TrimSpace(out)
	assert.True(t, strings.HasPrefix(link, server+"/redirect?"), link)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(link)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusFound, resp.StatusCode)
	assert.True(t, strings.HasPrefix(resp.Header.Get("Location"), "/trace/"), resp.Header.Get("Location"))

	out, err = plugin(t, "at", "deployment/demo", "--server", server, "--time", "2026-11-29T17:09:40Z")
	require.NoError(t, err)
	assert.Contains(t, out, "kind: Deployment\n")
	assert.Contains(t, out, "  name: demo\n")

	_, err = plugin(t, "trace", "deployment/nope", "--server", server, since)
	assert.ErrorContains(t, err, "no trace of deployments.apps/nope in namespace default of cluster test between")
	_, err = plugin(t, "trace", "demo", "--server", server)
	assert.EqualError(t, err, `"demo": want KIND/NAME, e.g. deployment/web`)
	_, err = plugin(t, "at", "deployment/demo", "--server", server)
	assert.ErrorContains(t, err, "--time is required")
	_, err = plugin(t, "trace", "deployment/demo", "--server", server, "--cluster", "other", since)
	assert.ErrorContains(t, err, "of cluster other")
	_, err = plugin(t, "trace", "deployment/demo")
	assert.ErrorContains(t, err, "no Kelemetry to ask: give --server (or $KELEMETRY_URL)")
	_, err = plugin(t, "trace", "deployment/demo", "--server", "localhost:1")
	assert.ErrorContains(t, err, `--server "localhost:1": want http(s)://host[:port]`)
}

// Without discovery, kinds map to resources by kubectl's short names and the English plural.
func TestKindsWithoutDiscovery(t *testing.T) {
	for in, want := range map[string]string{"deployment": "deployments", "ingress": "ingresses", "policy": "policies",
		"gateway": "gateways", "pod": "pods"} {
		assert.Equal(t, want, plural(in), in)
	}
	s := &session{o: &options{cluster: "c1"}}
	for arg, want := range map[string]objectRef{
		"po/web-0":               {Cluster: "c1", Resource: "pods", Namespace: "default", Name: "web-0"},
		"deploy/web":             {Cluster: "c1", Group: "apps", Resource: "deployments", Namespace: "default", Name: "web"},
		"node/n1":                {Cluster: "c1", Resource: "nodes", Name: "n1"},
		"widgets.example.com/w1": {Cluster: "c1", Group: "example.com", Resource: "widgets", Namespace: "default", Name: "w1"},
	} {
		got, err := s.object(context.Background(), []string{arg})
		require.NoError(t, err, arg)
		assert.Equal(t, want, got, arg)
	}
}

// The krew manifest template names the plugin's binary on every platform, each archive after its
// selector (scripts/krew-release.sh fills in the version, URLs and digests).
func TestKrewManifest(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "krew", "kelemetry.yaml"))
	require.NoError(t, err)
	var m struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct{ Name string }
		Spec       struct {
			Platforms []struct {
				Selector struct {
					MatchLabels map[string]string `yaml:"matchLabels"`
				}
				URI    string
				SHA256 string `yaml:"sha256"`
				Bin    string
			}
		}
	}
	require.NoError(t, yaml.Unmarshal(data, &m))
	assert.Equal(t, "krew.googlecontainertools.github.com/v1alpha2", m.APIVersion)
	assert.Equal(t, "Plugin", m.Kind)
	assert.Equal(t, "kelemetry", m.Metadata.Name, "kubectl kelemetry")
	require.Len(t, m.Spec.Platforms, 4)
	for _, p := range m.Spec.Platforms {
		osArch := p.Selector.MatchLabels["os"] + "_" + p.Selector.MatchLabels["arch"]
		assert.Equal(t, "kubectl-kelemetry", p.Bin)
		assert.Contains(t, p.URI, "_"+osArch+".tar.gz")
		assert.Equal(t, "{{SHA256_"+osArch+"}}", p.SHA256)
	}
}

// The port-forward goes to a ready pod behind the Service, on the pod's port of the Service's
// http port; a missing Service, port or ready pod is one line that says so.
func TestFindPod(t *testing.T) {
	ready, notReady := true, false
	httpName, other := "http", "metrics"
	port := int32(16686)
	cs := fake.NewClientset(
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kelemetry", Name: "kelemetry"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 16686}, {Name: "webhook", Port: 8080}}}},
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "kelemetry", Name: "kelemetry-abc",
			Labels: map[string]string{discoveryv1.LabelServiceName: "kelemetry"}},
			Ports: []discoveryv1.EndpointPort{{Name: &other, Port: &port}, {Name: &httpName, Port: &port}},
			Endpoints: []discoveryv1.Endpoint{
				{TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "kelemetry-old"}, Conditions: discoveryv1.EndpointConditions{Ready: &notReady}},
				{TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "kelemetry-0"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}},
			}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "empty", Name: "kelemetry"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 16686}}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ports", Name: "kelemetry"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "a", Port: 1}, {Name: "b", Port: 2}}}},
	)
	pod, target, err := findPod(context.Background(), cs, "kelemetry", "kelemetry")
	require.NoError(t, err)
	assert.Equal(t, "kelemetry-0", pod)
	assert.Equal(t, int32(16686), target)

	_, _, err = findPod(context.Background(), cs, "nowhere", "kelemetry")
	assert.ErrorContains(t, err, "find Kelemetry's Service nowhere/kelemetry (or give --server)")
	_, _, err = findPod(context.Background(), cs, "empty", "kelemetry")
	assert.EqualError(t, err, "service empty/kelemetry has no ready pod to port-forward to")
	_, _, err = findPod(context.Background(), cs, "ports", "kelemetry")
	assert.EqualError(t, err, "service ports/kelemetry has no port named http")
}

// With a port-forward the plugin takes the chart's generated credentials from the Service's
// namespace: the CA of Secret <service>-tls and the first token of <service>-api-token; absent
// Secrets leave them empty.
func TestChartCredentials(t *testing.T) {
	cs := fake.NewClientset(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "obs", Name: "kel-tls"},
			Data: map[string][]byte{"ca.crt": []byte("CA PEM"), "tls.crt": []byte("x"), "tls.key": []byte("y")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "obs", Name: "kel-api-token"},
			Data: map[string][]byte{"tokens": []byte("first-token\nsecond-token\n")}},
	)
	got := chartCredentials(t.Context(), cs, "obs", "kel")
	if string(got.caPEM) != "CA PEM" || got.token != "first-token" {
		t.Errorf("credentials = %q, %q; want the CA and the first token", got.caPEM, got.token)
	}
	if got := chartCredentials(t.Context(), cs, "obs", "other"); got.caPEM != nil || got.token != "" {
		t.Errorf("credentials of a Service without Secrets = %q, %q; want none", got.caPEM, got.token)
	}
}

// `changes` lists the rollout's writes newest first, filtered, with their diffs on request, and
// follows them live.
func TestPluginChanges(t *testing.T) {
	server := kelemetryServer(t)
	since := "--since=2026-11-29T17:00:00Z"

	out, err := plugin(t, "changes", "--server", server, since, "--user-kind", "person")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.Len(t, lines, 6, out)
	assert.Regexp(t, `^TIME\s+AGE\s+USER\s+KIND\s+VERB\s+OBJECT\s+NAMESPACE\s+CODE\s+CHANGED$`, lines[0])
	assert.Regexp(t, `^17:09:52\.\d{3}\s+\S+\s+admin\s+person\s+delete\s+deployments\.apps/demo\s+default\s+200`, lines[1], "newest first")
	assert.Regexp(t, `\s+patch\s+deployments\.apps/demo \(scale\)\s+default\s+200\s+spec\.replicas$`, lines[2])
	assert.Regexp(t, `admin\s+person\s+create\s+deployments\.apps/demo`, lines[5])

	out, err = plugin(t, "changes", "deployments/demo", "--server", server, since, "--verb", "patch", "--user", "admin", "-d")
	require.NoError(t, err)
	assert.Contains(t, out, "    spec.template.spec.containers[name=alpine].image alpine:3.16 -> alpine:3.17")
	assert.Contains(t, out, "    spec.replicas 2 -> 4")

	out, err = plugin(t, "changes", "pods", "--server", server, since, "--outcome", "failed", "--limit", "2")
	require.NoError(t, err)
	assert.Len(t, strings.Split(strings.TrimRight(out, "\n"), "\n"), 3, out)

	_, err = plugin(t, "changes", "--server", server, "--since", "yesterday")
	assert.ErrorContains(t, err, `since "yesterday": want a duration (15m) or a time`)

	// --follow: the backlog, then until Ctrl-C.
	ctx, cancel := context.WithCancel(context.Background())
	var buf logtest.Buffer
	done := make(chan error, 1)
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	go func() {
		done <- run(ctx, []string{"changes", "--server", server, since, "--user-kind", "person", "--follow"}, &buf, io.Discard)
	}()
	require.Eventually(t, func() bool { return strings.Count(buf.String(), "\n") >= 6 }, 10*time.Second, 20*time.Millisecond, buf.String())
	cancel()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("--follow did not end with its context")
	}
	lines = strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	assert.Regexp(t, `^TIME\s+AGE\s+USER`, lines[0])
	assert.Regexp(t, `admin\s+person\s+create\s+deployments\.apps/demo`, lines[1], "oldest first")
}

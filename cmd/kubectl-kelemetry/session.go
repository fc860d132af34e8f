package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// objectRef names an object as Kelemetry's API does.
type objectRef struct {
	Cluster, Group, Resource, Namespace, Name string
}

func (r objectRef) String() string {
	s := r.Resource
	if r.Group != "" {
		s += "." + r.Group
	}
	s += "/" + r.Name
	if r.Namespace != "" {
		s += " in namespace " + r.Namespace
	}
	return s + " of cluster " + r.Cluster
}

// session is a connection to Kelemetry's API and, when a kubeconfig loads, to the cluster.
type session struct {
	o       *options
	api     *apiClient
	forward *portForward
	kube    *rest.Config
	ns      string // the kubeconfig context's namespace
	ctxName string // the kubeconfig context's name
}

func (s *session) close() {
	if s.forward != nil {
		s.forward.stop()
	}
}

// session connects: --server, $KELEMETRY_URL, or a port-forward to the Service.
func (o *options) session(ctx context.Context, stderr io.Writer) (*session, error) {
	s := &session{o: o}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.context})
	kubeErr := error(nil)
	if s.kube, kubeErr = cc.ClientConfig(); kubeErr == nil {
		s.ns, _, _ = cc.Namespace()
		if raw, err := cc.RawConfig(); err == nil {
			s.ctxName = raw.CurrentContext
			if o.context != "" {
				s.ctxName = o.context
			}
		}
	}
	token, err := o.token()
	if err != nil {
		return nil, err
	}
	tlsCfg, err := o.tlsConfig()
	if err != nil {
		return nil, err
	}
	server := o.server
	if server == "" {
		server = os.Getenv("KELEMETRY_URL")
	}
	if server == "" {
		if kubeErr != nil {
			return nil, fmt.Errorf("no Kelemetry to ask: give --server (or $KELEMETRY_URL), or a kubeconfig to port-forward to its Service: %w", kubeErr)
		}
		pf, err := startPortForward(ctx, s.kube, o.serviceNamespace, o.service)
		if err != nil {
			return nil, err
		}
		s.forward = pf
		// The chart's own credentials (tls.source, auth.generateTokens), when the kubeconfig
		// may read them and the flags give none.
		if cs, err := kubernetes.NewForConfig(s.kube); err == nil {
			creds := chartCredentials(ctx, cs, o.serviceNamespace, o.service)
			if creds.caPEM != nil && o.caFile == "" && !o.insecure {
				pool := x509.NewCertPool()
				if pool.AppendCertsFromPEM(creds.caPEM) {
					tlsCfg.RootCAs = pool
					o.https = true
				}
			}
			if token == "" {
				token = creds.token
			}
		}
		scheme := "http"
		if o.https {
			scheme = "https"
			if tlsCfg.ServerName == "" {
				tlsCfg.ServerName = o.service + "." + o.serviceNamespace + ".svc"
			}
		}
		server = scheme + "://" + pf.addr
		fmt.Fprintf(stderr, "port-forward to service %s/%s (pod %s) on %s\n", o.serviceNamespace, o.service, pf.pod, pf.addr)
	}
	u, err := url.Parse(strings.TrimSuffix(server, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server %q: want http(s)://host[:port]", server)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	s.api = &apiClient{base: u.String(), token: token, http: &http.Client{Transport: tr, Timeout: 2 * time.Minute}}
	return s, nil
}

// credentials are what the chart generated for the Service name: the CA of its serving
// certificate (Secret <name>-tls, ca.crt) and the API token (Secret <name>-api-token, the first
// line of tokens). Either is empty when its Secret is absent or unreadable.
type credentials struct {
	caPEM []byte
	token string
}

// chartCredentials reads the chart's generated credentials of the Service name in ns.
func chartCredentials(ctx context.Context, cs kubernetes.Interface, ns, name string) credentials {
	var c credentials
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if sec, err := cs.CoreV1().Secrets(ns).Get(ctx, name+"-tls", metav1.GetOptions{}); err == nil && len(sec.Data["ca.crt"]) > 0 {
		c.caPEM = sec.Data["ca.crt"]
	}
	if sec, err := cs.CoreV1().Secrets(ns).Get(ctx, name+"-api-token", metav1.GetOptions{}); err == nil {
		first, _, _ := strings.Cut(strings.TrimSpace(string(sec.Data["tokens"])), "\n")
		c.token = strings.TrimSpace(first)
	}
	return c
}

func (o *options) token() (string, error) {
	if o.tokenFile != "" {
		b, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return os.Getenv("KELEMETRY_TOKEN"), nil
}

func (o *options) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: o.insecure} //nolint:gosec // only with --insecure-skip-tls-verify
	if o.caFile != "" {
		pem, err := os.ReadFile(o.caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s: no PEM certificate in it", o.caFile)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// object resolves KIND/NAME (or KIND NAME) into Kelemetry's names: the resource and group by the
// cluster's discovery when the kubeconfig reaches it (short names too: deploy, po), else from
// the kind's plural; the namespace from -n or the context; the cluster as --cluster says.
func (s *session) object(ctx context.Context, args []string) (objectRef, error) {
	kind, name, ok := strings.Cut(args[0], "/")
	if len(args) == 2 {
		kind, name, ok = args[0], args[1], !strings.Contains(args[0], "/")
	}
	if !ok || kind == "" || name == "" {
		return objectRef{}, fmt.Errorf("%q: want KIND/NAME, e.g. deployment/web", strings.Join(args, " "))
	}
	ref := objectRef{Name: name}
	gr := schema.ParseGroupResource(strings.ToLower(kind))
	namespaced := true
	if gvr, scoped, err := s.discover(gr); err == nil {
		ref.Group, ref.Resource, namespaced = gvr.Group, gvr.Resource, scoped
	} else {
		ref.Group, ref.Resource = gr.Group, gr.Resource
		if full, ok := shortNames[gr.Resource]; ok && gr.Group == "" {
			ref.Group, ref.Resource = full.Group, full.Resource
		} else if !strings.HasSuffix(ref.Resource, "s") {
			ref.Resource = plural(ref.Resource)
		}
		if clusterScoped[ref.Resource] {
			namespaced = false
		}
	}
	if namespaced {
		ref.Namespace = s.o.namespace
		if ref.Namespace == "" {
			ref.Namespace = s.ns
		}
		if ref.Namespace == "" {
			ref.Namespace = "default"
		}
	}
	cluster, err := s.clusterName(ctx)
	if err != nil {
		return objectRef{}, err
	}
	ref.Cluster = cluster
	return ref, nil
}

// discover maps a resource, kind or short name to its resource with the cluster's discovery.
func (s *session) discover(gr schema.GroupResource) (schema.GroupVersionResource, bool, error) {
	if s.kube == nil {
		return schema.GroupVersionResource{}, false, errors.New("no kubeconfig")
	}
	cfg := rest.CopyConfig(s.kube)
	cfg.Timeout = 5 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return schema.GroupVersionResource{}, false, err
	}
	cached := memory.NewMemCacheClient(dc)
	mapper := restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(cached), cached, nil)
	gvr, err := mapper.ResourceFor(gr.WithVersion(""))
	if err != nil {
		return schema.GroupVersionResource{}, false, err
	}
	namespaced := true
	if kinds, err := mapper.KindsFor(gvr); err == nil && len(kinds) > 0 {
		if m, err := mapper.RESTMapping(kinds[0].GroupKind(), kinds[0].Version); err == nil {
			namespaced = m.Scope.Name() == "namespace"
		}
	}
	return gvr, namespaced, nil
}

// shortNames are kubectl's short names of the built-in resources, for when discovery is out of
// reach.
var shortNames = map[string]schema.GroupResource{
	"po": {Resource: "pods"}, "svc": {Resource: "services"}, "cm": {Resource: "configmaps"},
	"ns": {Resource: "namespaces"}, "no": {Resource: "nodes"}, "pvc": {Resource: "persistentvolumeclaims"},
	"pv": {Resource: "persistentvolumes"}, "sa": {Resource: "serviceaccounts"}, "ev": {Resource: "events"},
	"deploy": {Group: "apps", Resource: "deployments"}, "deployment": {Group: "apps", Resource: "deployments"},
	"rs": {Group: "apps", Resource: "replicasets"}, "replicaset": {Group: "apps", Resource: "replicasets"},
	"sts": {Group: "apps", Resource: "statefulsets"}, "statefulset": {Group: "apps", Resource: "statefulsets"},
	"ds": {Group: "apps", Resource: "daemonsets"}, "daemonset": {Group: "apps", Resource: "daemonsets"},
	"job": {Group: "batch", Resource: "jobs"}, "cj": {Group: "batch", Resource: "cronjobs"}, "cronjob": {Group: "batch", Resource: "cronjobs"},
	"ing": {Group: "networking.k8s.io", Resource: "ingresses"}, "ingress": {Group: "networking.k8s.io", Resource: "ingresses"},
	"pdb": {Group: "policy", Resource: "poddisruptionbudgets"}, "hpa": {Group: "autoscaling", Resource: "horizontalpodautoscalers"},
}

// clusterScoped are built-in resources without a namespace.
var clusterScoped = map[string]bool{"nodes": true, "namespaces": true, "persistentvolumes": true, "clusterroles": true,
	"clusterrolebindings": true, "customresourcedefinitions": true, "storageclasses": true, "priorityclasses": true}

// clusterName is --cluster, $KELEMETRY_CLUSTER, the only cluster Kelemetry knows, or the
// kubeconfig context's name when Kelemetry knows a cluster of that name.
func (s *session) clusterName(ctx context.Context) (string, error) {
	if s.o.cluster != "" {
		return s.o.cluster, nil
	}
	if c := os.Getenv("KELEMETRY_CLUSTER"); c != "" {
		return c, nil
	}
	var resp struct {
		Data []string `json:"data"`
	}
	if err := s.api.getJSON(ctx, "/api/services/tracing/operations", nil, &resp); err != nil {
		return "", err
	}
	switch {
	case len(resp.Data) == 1:
		return resp.Data[0], nil
	case len(resp.Data) == 0:
		return "", errors.New("no cluster traced by Kelemetry yet")
	}
	for _, c := range resp.Data {
		if c == s.ctxName {
			return c, nil
		}
	}
	return "", fmt.Errorf("several clusters are traced (%s): name one with --cluster", strings.Join(resp.Data, ", "))
}

// jaegerTrace is a trace of Jaeger Query's API.
type jaegerTrace struct {
	TraceID string       `json:"traceID"`
	Spans   []jaegerSpan `json:"spans"`
}

type jaegerSpan struct {
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	StartTime int64 `json:"startTime"` // µs since the epoch
	Duration  int64 `json:"duration"`  // µs
	Tags      []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
	Logs []struct {
		Timestamp int64 `json:"timestamp"`
		Fields    []struct {
			Key   string `json:"key"`
			Value any    `json:"value"`
		} `json:"fields"`
	} `json:"logs"`
}

func (sp jaegerSpan) tag(key string) string {
	for _, t := range sp.Tags {
		if t.Key == key {
			return fmt.Sprint(t.Value)
		}
	}
	return ""
}

// findTrace searches the object's merged tree (the tracing display with the full tree) within
// [from, to].
func (s *session) findTrace(ctx context.Context, ref objectRef, from, to time.Time) (jaegerTrace, error) {
	tags := map[string]string{"cluster": ref.Cluster, "resource": ref.Resource, "name": ref.Name}
	if ref.Group != "" {
		tags["group"] = ref.Group
	}
	if ref.Namespace != "" {
		tags["namespace"] = ref.Namespace
	}
	tagJSON, _ := json.Marshal(tags)
	q := url.Values{"service": {"tracing [full tree]"}, "tags": {string(tagJSON)}, "limit": {"1"},
		"start": {strconv.FormatInt(from.UnixMicro(), 10)}, "end": {strconv.FormatInt(to.UnixMicro(), 10)}}
	var resp struct {
		Data []jaegerTrace `json:"data"`
	}
	if err := s.api.getJSON(ctx, "/api/traces", q, &resp); err != nil {
		return jaegerTrace{}, err
	}
	if len(resp.Data) == 0 {
		return jaegerTrace{}, fmt.Errorf("no trace of %s between %s and %s (a wider --since?)", ref,
			from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
	}
	return resp.Data[0], nil
}

// apiClient calls Kelemetry's HTTP API.
type apiClient struct {
	base  string
	token string
	http  *http.Client
}

// getJSON GETs path with query and decodes the answer into out; an error answer is an error with
// the API's message.
func (c *apiClient) getJSON(ctx context.Context, path string, query url.Values, out any) error {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("ask Kelemetry at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return fmt.Errorf("read Kelemetry's answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Errors []struct {
				Msg string `json:"msg"`
			} `json:"errors"`
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &e) == nil {
			if len(e.Errors) > 0 {
				msg = e.Errors[0].Msg
			} else if e.Error != "" {
				msg = e.Error
			}
		}
		if resp.StatusCode == http.StatusUnauthorized {
			msg += " (give a token: --token-file or $KELEMETRY_TOKEN)"
		}
		return fmt.Errorf("the API answered %s: %s", resp.Status, msg)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("decode Kelemetry's answer to %s: %w", path, err)
	}
	return nil
}

// portForward forwards a local port to a pod behind Kelemetry's Service.
type portForward struct {
	addr   string
	pod    string
	stopCh chan struct{}
	done   chan struct{} // closed when forwarding ended, err then set
	err    error
}

func (p *portForward) stop() {
	close(p.stopCh)
	<-p.done
}

// startPortForward forwards 127.0.0.1:<free port> to the API port of a ready pod behind the
// Service ns/name, through the API server (as kubectl port-forward svc/name does).
func startPortForward(ctx context.Context, cfg *rest.Config, ns, name string) (*portForward, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	pod, target, err := findPod(ctx, cs, ns, name)
	if err != nil {
		return nil, err
	}
	rt, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, err
	}
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("portforward")
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, req.URL())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	local := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	stopCh, ready := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("%d:%d", local, target)}, stopCh, ready, io.Discard, io.Discard)
	if err != nil {
		return nil, err
	}
	pf := &portForward{addr: fmt.Sprintf("127.0.0.1:%d", local), pod: pod, stopCh: stopCh, done: make(chan struct{})}
	go func() {
		pf.err = fw.ForwardPorts()
		close(pf.done)
	}()
	select {
	case <-ready:
		return pf, nil
	case <-pf.done:
		return nil, fmt.Errorf("port-forward to pod %s/%s: %w", ns, pod, pf.err)
	case <-ctx.Done():
		close(stopCh)
		<-pf.done
		return nil, ctx.Err()
	case <-time.After(30 * time.Second):
		close(stopCh)
		<-pf.done
		return nil, fmt.Errorf("port-forward to pod %s/%s: not ready after 30s", ns, pod)
	}
}

// findPod finds a ready pod behind the Service ns/name and the pod's port of the Service's http
// port.
func findPod(ctx context.Context, cs kubernetes.Interface, ns, name string) (string, int32, error) {
	svc, err := cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", 0, fmt.Errorf("find Kelemetry's Service %s/%s (or give --server): %w", ns, name, err)
	}
	var port *corev1.ServicePort
	for i, p := range svc.Spec.Ports {
		if p.Name == "http" || len(svc.Spec.Ports) == 1 {
			port = &svc.Spec.Ports[i]
		}
	}
	if port == nil {
		return "", 0, fmt.Errorf("service %s/%s has no port named http", ns, name)
	}
	slices, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
	if err != nil {
		return "", 0, fmt.Errorf("find the pods of service %s/%s: %w", ns, name, err)
	}
	var pod string
	var target int32
	for _, sl := range slices.Items {
		for _, p := range sl.Ports {
			if p.Name != nil && *p.Name == port.Name && p.Port != nil {
				target = *p.Port
			}
		}
		for _, ep := range sl.Endpoints {
			if ep.TargetRef != nil && ep.TargetRef.Kind == "Pod" && (ep.Conditions.Ready == nil || *ep.Conditions.Ready) {
				pod = ep.TargetRef.Name
			}
		}
	}
	if pod == "" || target == 0 {
		return "", 0, fmt.Errorf("service %s/%s has no ready pod to port-forward to", ns, name)
	}
	return pod, target, nil
}

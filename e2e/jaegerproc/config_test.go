package jaegerproc

import (
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var testPorts = Ports{OTLPGRPC: 40001, QueryHTTP: 40002, QueryGRPC: 40003, Health: 40004, RemoteStorage: 40005}

func render(t *testing.T, opts Options, ports Ports) map[string]any {
	t.Helper()
	b, err := Config(opts, ports)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("%v in\n%s", err, b)
	}
	return cfg
}

// get walks the config by keys.
func get(t *testing.T, cfg any, path string) any {
	t.Helper()
	cur := cfg
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("%s: %q is not a map in %v", path, k, cur)
		}
		if cur, ok = m[k]; !ok {
			t.Fatalf("%s: no %q in %v", path, k, m)
		}
	}
	return cur
}

func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// endpoints collects every "endpoint" value of the configuration with its path.
func endpoints(v any, path string, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			if k == "endpoint" {
				if s, ok := c.(string); ok {
					out[path] = s
				}
				continue
			}
			endpoints(c, strings.TrimPrefix(path+"."+k, "."), out)
		}
	case []any:
		for i, c := range x {
			endpoints(c, path+"["+strconv.Itoa(i)+"]", out)
		}
	}
}

func TestConfigBackend(t *testing.T) {
	cfg := render(t, Options{Mode: ModeBackend, MaxTraces: 500}, testPorts)
	exts := strs(get(t, cfg, "service.extensions"))
	for _, want := range []string{"jaeger_storage", "jaeger_query", "healthcheckv2", "remote_storage"} {
		if !slices.Contains(exts, want) {
			t.Errorf("service.extensions %v lack %s", exts, want)
		}
	}
	if got := get(t, cfg, "extensions.jaeger_storage.backends.memory.memory.max_traces"); got != float64(500) {
		t.Errorf("max_traces = %v", got)
	}
	if got := get(t, cfg, "extensions.remote_storage.storage"); got != MemoryBackend {
		t.Errorf("remote_storage serves %v", got)
	}
	if got := get(t, cfg, "exporters.jaeger_storage_exporter.trace_storage"); got != MemoryBackend {
		t.Errorf("the pipeline writes to %v", got)
	}
	if got := get(t, cfg, "extensions.jaeger_query.storage.traces"); got != MemoryBackend {
		t.Errorf("jaeger_query reads %v", got)
	}
	if got := strs(get(t, cfg, "service.pipelines.traces.receivers")); !slices.Equal(got, []string{"otlp"}) {
		t.Errorf("receivers = %v, want only otlp", got)
	}
}

// With BadgerDir the backend keeps its traces on disk, so that they survive a restart.
func TestConfigBadger(t *testing.T) {
	cfg := render(t, Options{Mode: ModeBackend, BadgerDir: "/data/badger"}, testPorts)
	backend, ok := get(t, cfg, "extensions.jaeger_storage.backends."+MemoryBackend).(map[string]any)
	if !ok || backend["memory"] != nil {
		t.Fatalf("backend %v, want badger only", backend)
	}
	if got := get(t, cfg, "extensions.jaeger_storage.backends."+MemoryBackend+".badger.directories.keys"); got != "/data/badger/keys" {
		t.Errorf("keys in %v", got)
	}
	if got := get(t, cfg, "extensions.jaeger_storage.backends."+MemoryBackend+".badger.ephemeral"); got != false {
		t.Errorf("ephemeral = %v", got)
	}
}

func TestConfigQuery(t *testing.T) {
	ports := testPorts
	ports.RemoteStorage = 0
	cfg := render(t, Options{Mode: ModeQuery, RemoteStorage: "127.0.0.1:17271"}, ports)
	if slices.Contains(strs(get(t, cfg, "service.extensions")), "remote_storage") {
		t.Error("ModeQuery serves remote_storage")
	}
	if got := get(t, cfg, "extensions.jaeger_storage.backends.remote.grpc.endpoint"); got != "127.0.0.1:17271" {
		t.Errorf("grpc backend endpoint = %v", got)
	}
	if got := get(t, cfg, "extensions.jaeger_storage.backends.remote.grpc.tls.insecure"); got != true {
		t.Errorf("grpc backend tls.insecure = %v", got)
	}
	if got := get(t, cfg, "extensions.jaeger_storage.backends.remote.grpc.timeout"); got != "5s" {
		t.Errorf("grpc backend timeout = %v", got)
	}
	if got := get(t, cfg, "extensions.jaeger_query.storage.traces"); got != RemoteBackend {
		t.Errorf("jaeger_query reads %v", got)
	}
	// Nothing Jaeger receives is written into the remote server.
	if got := get(t, cfg, "exporters.jaeger_storage_exporter.trace_storage"); got == RemoteBackend {
		t.Errorf("the OTLP pipeline writes into the remote server")
	}
}

// Every listener is on 127.0.0.1 on one of the given ports (none on Jaeger's defaults such as
// 16686, 4317, 13133, 8888), each port used once; self-tracing and own metrics are off.
func TestConfigListeners(t *testing.T) {
	for _, tc := range []struct {
		opts  Options
		ports []int
	}{
		{Options{Mode: ModeBackend}, []int{40001, 40002, 40003, 40004, 40005}},
		{Options{Mode: ModeQuery, RemoteStorage: "127.0.0.1:17271"}, []int{40001, 40002, 40003, 40004}},
	} {
		t.Run(tc.opts.Mode.String(), func(t *testing.T) {
			cfg := render(t, tc.opts, testPorts)
			eps := map[string]string{}
			endpoints(cfg, "", eps)
			var listen []int
			for path, ep := range eps {
				if strings.Contains(path, "backends.") {
					continue // a client, not a listener
				}
				host, port, err := net.SplitHostPort(ep)
				if err != nil || host != "127.0.0.1" {
					t.Errorf("%s: endpoint %q is not on 127.0.0.1", path, ep)
					continue
				}
				p, _ := strconv.Atoi(port)
				listen = append(listen, p)
			}
			slices.Sort(listen)
			if !slices.Equal(listen, tc.ports) {
				t.Errorf("listeners on %v, want %v (%v)", listen, tc.ports, eps)
			}
			if got := get(t, cfg, "extensions.jaeger_query.enable_tracing"); got != false {
				t.Errorf("enable_tracing = %v", got)
			}
			if got := get(t, cfg, "service.telemetry.metrics.level"); got != "none" {
				t.Errorf("metrics level = %v", got)
			}
			if hc := get(t, cfg, "extensions.healthcheckv2").(map[string]any); hc["grpc"] != nil {
				t.Errorf("healthcheckv2 serves gRPC too: %v", hc)
			}
			if protos := get(t, cfg, "receivers.otlp.protocols").(map[string]any); len(protos) != 1 || protos["grpc"] == nil {
				t.Errorf("otlp protocols = %v, want only grpc", protos)
			}
		})
	}
}

func TestConfigRejects(t *testing.T) {
	for name, tc := range map[string]struct {
		opts  Options
		ports Ports
	}{
		"query without remote":     {Options{Mode: ModeQuery}, testPorts},
		"query with a bad remote":  {Options{Mode: ModeQuery, RemoteStorage: "nohostport"}, testPorts},
		"backend with a remote":    {Options{Mode: ModeBackend, RemoteStorage: "127.0.0.1:1"}, testPorts},
		"unknown mode":             {Options{Mode: Mode(7)}, testPorts},
		"backend without its port": {Options{Mode: ModeBackend}, Ports{OTLPGRPC: 1, QueryHTTP: 2, QueryGRPC: 3, Health: 4}},
		"no query port":            {Options{Mode: ModeBackend}, Ports{OTLPGRPC: 1, QueryGRPC: 3, Health: 4, RemoteStorage: 5}},
		"negative max traces":      {Options{Mode: ModeBackend, MaxTraces: -1}, testPorts},
	} {
		if _, err := Config(tc.opts, tc.ports); err == nil {
			t.Errorf("%s: Config accepted %+v %+v", name, tc.opts, tc.ports)
		}
	}
}

func TestPortsFill(t *testing.T) {
	p := Ports{QueryHTTP: 40002}
	if err := p.fill(ModeQuery); err != nil {
		t.Fatal(err)
	}
	if p.QueryHTTP != 40002 || p.OTLPGRPC == 0 || p.QueryGRPC == 0 || p.Health == 0 || p.RemoteStorage != 0 {
		t.Errorf("ModeQuery ports = %+v", p)
	}
	if err := p.fill(ModeBackend); err != nil {
		t.Fatal(err)
	}
	if p.RemoteStorage == 0 {
		t.Errorf("ModeBackend ports = %+v", p)
	}
}

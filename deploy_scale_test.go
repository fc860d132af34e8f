package kelemetry

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kelemetry/kelemetry/store"
)

// scaleDir holds the example deployment of docs/operations/scaling.md.
const scaleDir = "deploy/scale"

// jaegerFile is the part of a Jaeger v2 configuration the scale example relies on. Jaeger
// validates the rest (jaeger validate --config=FILE).
type jaegerFile struct {
	Service struct {
		Extensions []string `yaml:"extensions"`
		Pipelines  map[string]struct {
			Receivers  []string `yaml:"receivers"`
			Processors []string `yaml:"processors"`
			Exporters  []string `yaml:"exporters"`
		} `yaml:"pipelines"`
	} `yaml:"service"`
	Extensions struct {
		JaegerStorage struct {
			Backends map[string]map[string]yaml.Node `yaml:"backends"`
		} `yaml:"jaeger_storage"`
		RemoteStorage *struct {
			Endpoint string `yaml:"endpoint"`
			Storage  string `yaml:"storage"`
		} `yaml:"remote_storage"`
		JaegerQuery *struct {
			Storage struct {
				Traces string `yaml:"traces"`
			} `yaml:"storage"`
			EnableTracing *bool `yaml:"enable_tracing"`
		} `yaml:"jaeger_query"`
		Others map[string]yaml.Node `yaml:",inline"`
	} `yaml:"extensions"`
	Receivers struct {
		OTLP *struct {
			Protocols struct {
				GRPC *struct {
					Endpoint          string `yaml:"endpoint"`
					MaxRecvMsgSizeMiB int    `yaml:"max_recv_msg_size_mib"`
				} `yaml:"grpc"`
			} `yaml:"protocols"`
		} `yaml:"otlp"`
		Others map[string]yaml.Node `yaml:",inline"`
	} `yaml:"receivers"`
	Processors map[string]yaml.Node `yaml:"processors"`
	Exporters  struct {
		StorageExporter *struct {
			TraceStorage string `yaml:"trace_storage"`
		} `yaml:"jaeger_storage_exporter"`
		Others map[string]yaml.Node `yaml:",inline"`
	} `yaml:"exporters"`
}

// grpcBackend is a jaeger_storage backend of type grpc (Jaeger's remote storage client).
type grpcBackend struct {
	Endpoint string `yaml:"endpoint"`
	TLS      struct {
		Insecure bool   `yaml:"insecure"`
		CAFile   string `yaml:"ca_file"`
	} `yaml:"tls"`
	Headers map[string]string `yaml:"headers"`
	Timeout time.Duration     `yaml:"timeout"`
}

func loadJaeger(t *testing.T, name string) jaegerFile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(scaleDir, name))
	require.NoError(t, err)
	var j jaegerFile
	require.NoError(t, yaml.Unmarshal(data, &j), name)

	// Every component the service names is configured, and every configured extension is used.
	has := func(kind, id string) bool {
		typ, _, _ := strings.Cut(id, "/")
		switch kind {
		case "extension":
			switch typ {
			case "jaeger_storage":
				return j.Extensions.JaegerStorage.Backends != nil
			case "remote_storage":
				return j.Extensions.RemoteStorage != nil
			case "jaeger_query":
				return j.Extensions.JaegerQuery != nil
			}
			_, ok := j.Extensions.Others[id]
			return ok
		case "receiver":
			if id == "otlp" {
				return j.Receivers.OTLP != nil
			}
			_, ok := j.Receivers.Others[id]
			return ok
		case "processor":
			_, ok := j.Processors[id]
			return ok
		default:
			if id == "jaeger_storage_exporter" {
				return j.Exporters.StorageExporter != nil
			}
			_, ok := j.Exporters.Others[id]
			return ok
		}
	}
	require.NotEmpty(t, j.Service.Extensions, "%s: service.extensions", name)
	for _, id := range j.Service.Extensions {
		assert.True(t, has("extension", id), "%s: extension %s is listed but not configured", name, id)
	}
	assert.Contains(t, j.Service.Extensions, "healthcheckv2", "%s: probes need healthcheckv2", name)
	for id, present := range map[string]bool{"jaeger_storage": j.Extensions.JaegerStorage.Backends != nil,
		"remote_storage": j.Extensions.RemoteStorage != nil, "jaeger_query": j.Extensions.JaegerQuery != nil} {
		if present {
			assert.Contains(t, j.Service.Extensions, id, "%s: extension %s is configured but not enabled", name, id)
		}
	}
	require.Contains(t, j.Service.Pipelines, "traces", "%s: Jaeger needs a trace pipeline", name)
	for pname, p := range j.Service.Pipelines {
		require.NotEmpty(t, p.Receivers, "%s: pipeline %s", name, pname)
		require.NotEmpty(t, p.Exporters, "%s: pipeline %s", name, pname)
		for _, id := range p.Receivers {
			assert.True(t, has("receiver", id), "%s: receiver %s", name, id)
		}
		for _, id := range p.Processors {
			assert.True(t, has("processor", id), "%s: processor %s", name, id)
		}
		for _, id := range p.Exporters {
			assert.True(t, has("exporter", id), "%s: exporter %s", name, id)
		}
	}
	require.NotNil(t, j.Exporters.StorageExporter, "%s: jaeger_storage_exporter", name)
	assert.Contains(t, j.Extensions.JaegerStorage.Backends, j.Exporters.StorageExporter.TraceStorage,
		"%s: jaeger_storage_exporter.trace_storage names a backend", name)
	for bname, b := range j.Extensions.JaegerStorage.Backends {
		assert.Len(t, b, 1, "%s: backend %s has exactly one type", name, bname)
	}
	return j
}

// backendOf decodes the backend called name of type typ.
func backendOf(t *testing.T, j jaegerFile, name, typ string, into any) {
	t.Helper()
	b, ok := j.Extensions.JaegerStorage.Backends[name]
	require.True(t, ok, "backend %s", name)
	node, ok := b[typ]
	require.True(t, ok, "backend %s is of type %s", name, typ)
	require.NoError(t, node.Decode(into))
}

// manifests are the Deployments and Services of kubernetes.yaml, decoded strictly.
type manifests struct {
	deployments []appsv1.Deployment
	services    []corev1.Service
}

func loadManifests(t *testing.T) manifests {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(scaleDir, "kubernetes.yaml"))
	require.NoError(t, err)
	var m manifests
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for i := 0; ; i++ {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "document %d", i)
		if doc == nil {
			continue
		}
		raw, err := sigsyaml.Marshal(doc)
		require.NoError(t, err)
		switch doc["kind"] {
		case "Deployment":
			var d appsv1.Deployment
			require.NoError(t, sigsyaml.UnmarshalStrict(raw, &d), "document %d", i)
			m.deployments = append(m.deployments, d)
		case "Service":
			var s corev1.Service
			require.NoError(t, sigsyaml.UnmarshalStrict(raw, &s), "document %d", i)
			m.services = append(m.services, s)
		default:
			t.Fatalf("document %d: unexpected kind %v", i, doc["kind"])
		}
	}
	for _, d := range m.deployments {
		require.NotNil(t, d.Spec.Selector, d.Name)
		for k, v := range d.Spec.Selector.MatchLabels {
			require.Equal(t, v, d.Spec.Template.Labels[k], "%s: the selector matches the pod template", d.Name)
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if f := configArg(c); f != "" {
				require.FileExists(t, filepath.Join(scaleDir, f), "%s runs a file of %s", d.Name, scaleDir)
			}
		}
	}
	return m
}

// configArg is the base name of the file a container's --config argument names.
func configArg(c corev1.Container) string {
	for i, a := range c.Args {
		switch {
		case a == "--config" && i+1 < len(c.Args):
			return filepath.Base(c.Args[i+1])
		case strings.HasPrefix(a, "--config="):
			return filepath.Base(strings.TrimPrefix(strings.TrimPrefix(a, "--config="), "file:"))
		}
	}
	return ""
}

// route follows a client's host:port through the Service of that name to the one Deployment it
// selects: the configuration file that Deployment runs and the container port the Service sends
// to.
func (m manifests) route(t *testing.T, addr string) (file string, port int) {
	t.Helper()
	host, p, err := net.SplitHostPort(addr)
	require.NoError(t, err, addr)
	svcPort, err := strconv.Atoi(p)
	require.NoError(t, err, addr)
	i := slices.IndexFunc(m.services, func(s corev1.Service) bool { return s.Name == host })
	require.GreaterOrEqual(t, i, 0, "%s: no Service %q in kubernetes.yaml", addr, host)
	svc := m.services[i]
	j := slices.IndexFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool { return int(sp.Port) == svcPort })
	require.GreaterOrEqual(t, j, 0, "%s: Service %s has no port %d", addr, host, svcPort)
	target := svc.Spec.Ports[j].TargetPort
	var matched []appsv1.Deployment
	for _, d := range m.deployments {
		ok := len(svc.Spec.Selector) > 0
		for k, v := range svc.Spec.Selector {
			ok = ok && d.Spec.Template.Labels[k] == v
		}
		if ok {
			matched = append(matched, d)
		}
	}
	require.Len(t, matched, 1, "%s: Service %s selects one Deployment", addr, host)
	containers := matched[0].Spec.Template.Spec.Containers
	require.Len(t, containers, 1, matched[0].Name)
	c := containers[0]
	switch {
	case target.Type == intstr.String:
		k := slices.IndexFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.Name == target.StrVal })
		require.GreaterOrEqual(t, k, 0, "%s: container port %q", matched[0].Name, target.StrVal)
		port = int(c.Ports[k].ContainerPort)
	case target.IntVal != 0:
		port = int(target.IntVal)
	default:
		port = svcPort
	}
	file = configArg(c)
	require.NotEmpty(t, file, "%s: --config", matched[0].Name)
	return file, port
}

// listenPort is the port of a listen address; a server behind a Service must not listen on
// localhost only.
func listenPort(t *testing.T, addr string) int {
	t.Helper()
	host, p, err := net.SplitHostPort(addr)
	require.NoError(t, err, addr)
	assert.Contains(t, []string{"", "0.0.0.0", "::"}, host, "%s: reachable through a Service", addr)
	port, err := strconv.Atoi(p)
	require.NoError(t, err, addr)
	return port
}

// TestDeployScaleConfigs checks the example of docs/operations/scaling.md: the Kelemetry files
// load and validate with the role and store their names say, the Jaeger files are complete
// pipelines, and every client address reaches, through the Service of kubernetes.yaml, the
// process and port that serve it.
func TestDeployScaleConfigs(t *testing.T) {
	kelemetryFiles, err := filepath.Glob(filepath.Join(scaleDir, "kelemetry-*.yaml"))
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"kelemetry-ingest.yaml", "kelemetry-query.yaml"}, baseNames(kelemetryFiles))
	configs := map[string]Config{}
	for _, f := range kelemetryFiles {
		c, err := LoadConfig(f)
		require.NoError(t, err)
		require.NoError(t, withTestSecurityFiles(t, c).Validate(), f)
		assert.Equal(t, store.BackendJaeger, c.storeConfig().WithDefaults().Backend, "%s: replicas share the jaeger backend", f)
		configs[filepath.Base(f)] = c
	}
	ingest, query := configs["kelemetry-ingest.yaml"], configs["kelemetry-query.yaml"]

	assert.Equal(t, RoleIngest, ingest.Role)
	assert.NotEmpty(t, ingest.Jaeger.OTLP.Endpoint, "ingest replicas write to the Jaeger collector")
	assert.False(t, ingest.Event.Watch, "the Event watch runs in one process only (kelemetry-events)")
	withWatch := ingest
	withWatch.Event.Watch = true // kelemetry-events: --event-watch=true on this file
	require.NoError(t, withTestSecurityFiles(t, withWatch).Validate())

	assert.Equal(t, RoleQuery, query.Role)
	assert.Empty(t, query.Jaeger.OTLP.Endpoint, "query replicas only read")
	require.NotEmpty(t, query.RemoteStorageAddr, "stock Jaeger Query reads the query replicas")

	require.NotZero(t, ingest.Window)
	assert.Equal(t, ingest.Window, query.Window, "trace IDs name their window: every replica uses one window length")
	assert.Equal(t, ingest.Jaeger.Endpoint, query.Jaeger.Endpoint, "one Jaeger storage")

	collector := loadJaeger(t, "jaeger-collector-remote-storage.yaml")
	uiOverK := loadJaeger(t, "jaeger-query-over-kelemetry.yaml")
	m := loadManifests(t)

	t.Run("collector", func(t *testing.T) {
		rs := collector.Extensions.RemoteStorage
		require.NotNil(t, rs, "remote_storage serves the database to the query replicas")
		assert.Equal(t, collector.Exporters.StorageExporter.TraceStorage, rs.Storage,
			"remote_storage serves the backend the pipeline writes")
		assert.Nil(t, collector.Extensions.JaegerQuery, "Jaeger Query over raw spans is not part of it")
		for _, p := range collector.Service.Pipelines {
			assert.NotContains(t, p.Processors, "batch",
				"no batch processor: it acknowledges spans it only holds in memory")
		}

		file, port := m.route(t, query.Jaeger.Endpoint)
		assert.Equal(t, "jaeger-collector-remote-storage.yaml", file, "jaeger.endpoint reaches the remote_storage Jaeger")
		assert.Equal(t, listenPort(t, rs.Endpoint), port, "jaeger.endpoint = remote_storage.endpoint")

		require.NotNil(t, collector.Receivers.OTLP)
		require.NotNil(t, collector.Receivers.OTLP.Protocols.GRPC, "the ingest replicas write OTLP gRPC")
		endpoint := strings.TrimPrefix(ingest.Jaeger.OTLP.Endpoint, "grpc://")
		file, port = m.route(t, endpoint)
		assert.Equal(t, "jaeger-collector-remote-storage.yaml", file, "jaeger.otlp.endpoint reaches the collector")
		assert.Equal(t, listenPort(t, collector.Receivers.OTLP.Protocols.GRPC.Endpoint), port, "jaeger.otlp.endpoint = the OTLP gRPC receiver")
		assert.GreaterOrEqual(t, collector.Receivers.OTLP.Protocols.GRPC.MaxRecvMsgSizeMiB, 16,
			"a batch of audit spans with large snapshots exceeds gRPC's default 4 MiB, and a refused batch is retried, not dropped")
	})

	t.Run("jaeger query over kelemetry", func(t *testing.T) {
		jq := uiOverK.Extensions.JaegerQuery
		require.NotNil(t, jq)
		require.NotNil(t, jq.EnableTracing, "enable_tracing defaults to true")
		assert.False(t, *jq.EnableTracing, "Jaeger's own spans would show up as a service")
		assert.Nil(t, uiOverK.Extensions.RemoteStorage)
		assert.NotEqual(t, jq.Storage.Traces, uiOverK.Exporters.StorageExporter.TraceStorage,
			"the pipeline writes elsewhere: Kelemetry does not accept OTLP writes")

		var b grpcBackend
		backendOf(t, uiOverK, jq.Storage.Traces, "grpc", &b)
		file, port := m.route(t, b.Endpoint)
		assert.Equal(t, "kelemetry-query.yaml", file, "Jaeger Query reads a query replica")
		assert.Equal(t, listenPort(t, query.RemoteStorageAddr), port, "grpc.endpoint = remoteStorageAddr")

		assert.GreaterOrEqual(t, b.Timeout, query.Query.WithDefaults().Timeout, "Jaeger waits at least the query timeout")
		assert.Equal(t, query.HTTPTLS.Enabled(), !b.TLS.Insecure, "the storage API takes httpTLS")
		if query.HTTPTLS.Enabled() {
			assert.NotEmpty(t, b.TLS.CAFile, "Jaeger verifies Kelemetry's certificate")
		}
		if len(query.HTTPAuth.TokenFiles) > 0 {
			assert.True(t, strings.HasPrefix(b.Headers["authorization"], "Bearer "), "the storage API takes httpAuth.tokenFiles")
		}
	})

	t.Run("kelemetry listeners", func(t *testing.T) {
		file, port := m.route(t, "kelemetry-ingest:"+strconv.Itoa(listenPort(t, ingest.AuditAddr)))
		assert.Equal(t, "kelemetry-ingest.yaml", file)
		assert.Equal(t, listenPort(t, ingest.AuditAddr), port, "the webhook Service reaches auditAddr")
		file, port = m.route(t, "kelemetry-query:"+strconv.Itoa(listenPort(t, query.HTTPAddr)))
		assert.Equal(t, "kelemetry-query.yaml", file)
		assert.Equal(t, listenPort(t, query.HTTPAddr), port, "the UI Service reaches httpAddr")
	})
}

func baseNames(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = filepath.Base(p)
	}
	return out
}

package jaegerproc

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/kelemetry/kelemetry/e2e/internal/proc"
)

// Mode is the shape of the Jaeger configuration.
type Mode int

const (
	// ModeBackend is Jaeger as a trace database: a memory backend fed by the OTLP gRPC receiver
	// (through jaeger_storage_exporter) and served over jaeger.storage.v2 by the remote_storage
	// extension, which is what a Kelemetry store reading from Jaeger talks to. Jaeger Query
	// reads the same backend.
	ModeBackend Mode = iota
	// ModeQuery is Jaeger Query in front of a remote jaeger.storage.v2 server
	// (Options.RemoteStorage), e.g. Kelemetry's --remote-storage-addr. Its OTLP pipeline (which
	// the collector requires) writes into a small memory backend of its own, never into the
	// remote server.
	ModeQuery
)

// String names the mode.
func (m Mode) String() string {
	switch m {
	case ModeBackend:
		return "backend"
	case ModeQuery:
		return "query"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// Backend names in the jaeger_storage extension.
const (
	// MemoryBackend is ModeBackend's store (remote_storage and jaeger_query serve it): memory,
	// or Badger with Options.BadgerDir; the name stays.
	MemoryBackend = "memory"
	// RemoteBackend is ModeQuery's grpc storage backend (the remote jaeger.storage.v2 server).
	RemoteBackend = "remote"
	// sinkBackend receives ModeQuery's OTLP pipeline.
	sinkBackend = "sink"
)

// Defaults of Options.
const (
	DefaultMaxTraces     = 100_000
	DefaultRemoteTimeout = 5 * time.Second
	DefaultLogLevel      = "info"
)

// Ports are Jaeger's listeners, all on 127.0.0.1. Every listener the configuration opens is
// here: a zero port is replaced by a free one when the process is first started, and the same
// ports are used again on restart.
type Ports struct {
	// OTLPGRPC is the OTLP gRPC receiver.
	OTLPGRPC int
	// QueryHTTP is Jaeger Query's HTTP API (/api/*, /api/v3/*, the UI placeholder).
	QueryHTTP int
	// QueryGRPC is Jaeger Query's gRPC API (api_v2, api_v3).
	QueryGRPC int
	// Health is the healthcheckv2 extension's HTTP listener (GET /status).
	Health int
	// RemoteStorage is the remote_storage extension (jaeger.storage.v2), ModeBackend only.
	RemoteStorage int
}

// fill replaces zero ports by free ones.
func (p *Ports) fill(mode Mode) error {
	ports := []*int{&p.OTLPGRPC, &p.QueryHTTP, &p.QueryGRPC, &p.Health}
	if mode == ModeBackend {
		ports = append(ports, &p.RemoteStorage)
	}
	for _, port := range ports {
		if *port != 0 {
			continue
		}
		free, err := pickPort()
		if err != nil {
			return err
		}
		*port = free
	}
	return nil
}

// Addr returns 127.0.0.1:port.
func Addr(port int) string { return proc.HostPort(port) }

// FreeAddr returns a 127.0.0.1:port address that was free a moment ago, e.g. for Kelemetry's
// --remote-storage-addr.
func FreeAddr() (string, error) {
	p, err := proc.FreePort()
	if err != nil {
		return "", err
	}
	return Addr(p), nil
}

// pickPort picks the free ports of Ports.fill (a variable for tests).
var pickPort = proc.FreePort

// validate checks the options Config renders.
func (o *Options) validate() error {
	switch o.Mode {
	case ModeBackend:
		if o.RemoteStorage != "" {
			return errors.New("jaegerproc: RemoteStorage is for ModeQuery")
		}
	case ModeQuery:
		if _, _, err := net.SplitHostPort(o.RemoteStorage); err != nil {
			return fmt.Errorf("jaegerproc: ModeQuery needs RemoteStorage HOST:PORT: %w", err)
		}
	default:
		return fmt.Errorf("jaegerproc: unknown mode %d", o.Mode)
	}
	if o.MaxTraces < 0 || o.RemoteTimeout < 0 {
		return errors.New("jaegerproc: negative MaxTraces or RemoteTimeout")
	}
	return nil
}

// Config renders the Jaeger configuration (YAML) of opts with its ports, after defaults: every
// listener on 127.0.0.1, Jaeger's self-tracing off (enable_tracing: false, else a "jaeger"
// service appears in the data), its own metrics off (telemetry metrics level none, so no 8888
// listener), and no extension beyond those the mode needs (no expvar, zpages, remote sampling,
// healthcheck gRPC, legacy receivers).
func Config(opts Options, ports Ports) ([]byte, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	for name, p := range map[string]int{"OTLPGRPC": ports.OTLPGRPC, "QueryHTTP": ports.QueryHTTP, "QueryGRPC": ports.QueryGRPC, "Health": ports.Health} {
		if p <= 0 {
			return nil, fmt.Errorf("jaegerproc: port %s not set", name)
		}
	}
	type m = map[string]any
	extensions := []string{"jaeger_storage", "jaeger_query", "healthcheckv2"}
	backends := m{}
	var queryBackend, sinkTo string
	switch opts.Mode {
	case ModeBackend:
		if ports.RemoteStorage <= 0 {
			return nil, errors.New("jaegerproc: port RemoteStorage not set")
		}
		extensions = append(extensions, "remote_storage")
		backends[MemoryBackend] = m{"memory": m{"max_traces": opts.MaxTraces}}
		if opts.BadgerDir != "" {
			backends[MemoryBackend] = m{"badger": m{"ephemeral": false, "directories": m{
				"keys": filepath.Join(opts.BadgerDir, "keys"), "values": filepath.Join(opts.BadgerDir, "values"),
			}}}
		}
		queryBackend, sinkTo = MemoryBackend, MemoryBackend
	case ModeQuery:
		backends[RemoteBackend] = m{"grpc": m{
			"endpoint": opts.RemoteStorage,
			"tls":      m{"insecure": true},
			"timeout":  opts.RemoteTimeout.String(),
		}}
		backends[sinkBackend] = m{"memory": m{"max_traces": 1000}}
		queryBackend, sinkTo = RemoteBackend, sinkBackend
	}
	exts := m{
		"healthcheckv2":  m{"use_v2": true, "http": m{"endpoint": Addr(ports.Health)}},
		"jaeger_storage": m{"backends": backends},
		"jaeger_query": m{
			"storage":        m{"traces": queryBackend},
			"enable_tracing": false,
			"http":           m{"endpoint": Addr(ports.QueryHTTP)},
			"grpc":           m{"endpoint": Addr(ports.QueryGRPC)},
		},
	}
	if opts.Mode == ModeBackend {
		exts["remote_storage"] = m{"endpoint": Addr(ports.RemoteStorage), "storage": MemoryBackend}
	}
	cfg := m{
		"service": m{
			"extensions": extensions,
			"pipelines": m{"traces": m{
				"receivers":  []string{"otlp"},
				"processors": []string{"batch"},
				"exporters":  []string{"jaeger_storage_exporter"},
			}},
			"telemetry": m{
				"logs":    m{"level": opts.LogLevel},
				"metrics": m{"level": "none"},
			},
		},
		"extensions": exts,
		"receivers":  m{"otlp": m{"protocols": m{"grpc": m{"endpoint": Addr(ports.OTLPGRPC)}}}},
		"processors": m{"batch": m{"timeout": "100ms"}},
		"exporters":  m{"jaeger_storage_exporter": m{"trace_storage": sinkTo}},
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("jaegerproc: render config: %w", err)
	}
	return out, nil
}

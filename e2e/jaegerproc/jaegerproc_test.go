package jaegerproc

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	resourcev1 "go.opentelemetry.io/proto/otlp/resource/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// getJSON GETs url and decodes a 200 answer into out; it returns the status code.
func getJSON(ctx context.Context, url string, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return resp.StatusCode, json.Unmarshal(body, out)
}

func exportSpan(ctx context.Context, t *testing.T, addr string, traceID []byte) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	now := uint64(time.Now().UnixNano())
	str := func(k, v string) *commonv1.KeyValue {
		return &commonv1.KeyValue{Key: k, Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: v}}}
	}
	_, err = collectortrace.NewTraceServiceClient(conn).Export(ctx, &collectortrace.ExportTraceServiceRequest{
		ResourceSpans: []*tracev1.ResourceSpans{{
			Resource: &resourcev1.Resource{Attributes: []*commonv1.KeyValue{str("service.name", "object")}},
			ScopeSpans: []*tracev1.ScopeSpans{{Spans: []*tracev1.Span{{
				TraceId: traceID, SpanId: []byte{1, 2, 3, 4, 5, 6, 7, 8}, Name: "deployments/demo",
				StartTimeUnixNano: now - uint64(time.Second), EndTimeUnixNano: now,
				Attributes: []*commonv1.KeyValue{str("kelemetry.object.name", "demo")},
			}}}},
		}},
	})
	if err != nil {
		t.Fatalf("OTLP export: %v", err)
	}
}

type tracesAnswer struct {
	Data []struct {
		TraceID string `json:"traceID"`
		Spans   []struct {
			OperationName string `json:"operationName"`
		} `json:"spans"`
	} `json:"data"`
}

// waitTrace polls Jaeger Query for the trace until it holds the span or the time is up.
func waitTrace(ctx context.Context, t *testing.T, j *Jaeger, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var tr tracesAnswer
		_, err := getJSON(ctx, j.QueryURL+"/api/traces/"+id, &tr)
		if err == nil && len(tr.Data) == 1 && len(tr.Data[0].Spans) == 1 && tr.Data[0].Spans[0].OperationName == "deployments/demo" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace %s not readable through Jaeger Query: %v %+v", id, err, tr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The backend shape: a span sent to the OTLP receiver is stored (Jaeger Query reads it back),
// remote_storage answers gRPC health on its port; a restart is quick, keeps the ports and starts
// empty.
func TestBackend(t *testing.T) {
	j := StartT(t, Options{Mode: ModeBackend})
	ctx := t.Context()
	if j.RemoteStorageAddr == "" {
		t.Fatal("no remote storage address")
	}
	id := []byte{0xab, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	hexID := "ab0102030405060708090a0b0c0d0e0f"
	exportSpan(ctx, t, j.OTLPAddr, id)
	waitTrace(ctx, t, j, hexID)

	conn, err := grpc.NewClient(j.RemoteStorageAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("remote_storage health: %v %v", h, err)
	}

	var services struct {
		Data []string `json:"data"`
	}
	if _, err := getJSON(ctx, j.QueryURL+"/api/services", &services); err != nil {
		t.Fatal(err)
	}
	if strings.Join(services.Data, ",") != "object" {
		t.Errorf("services = %v, want only object (no self-tracing)", services.Data)
	}

	before := j.Ports
	t0 := time.Now()
	if err := j.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	// SIGTERM ends Jaeger at once, even after remote_storage served calls (its self-tracing
	// would otherwise wait 10s for a flush to nowhere, and get killed).
	if took := time.Since(t0); took > 5*time.Second {
		t.Errorf("restart took %s", took)
	}
	if j.Ports != before {
		t.Errorf("ports changed on restart: %+v -> %+v", before, j.Ports)
	}
	if err := j.Exited(); err != nil {
		t.Fatal(err)
	}
	var tr tracesAnswer
	if code, _ := getJSON(ctx, j.QueryURL+"/api/traces/"+hexID, &tr); code != http.StatusNotFound {
		t.Errorf("after a restart the memory backend answers %d for the old trace, want 404", code)
	}
	exportSpan(ctx, t, j.OTLPAddr, id)
	waitTrace(ctx, t, j, hexID)

	if err := j.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := j.Exited(); err == nil {
		t.Error("Exited is nil after Stop")
	}
	if err := j.Stop(); err != nil {
		t.Errorf("a second Stop: %v", err)
	}
}

// The query shape with its remote storage down: Jaeger still starts (connections are lazy) and
// answers the API at once with an error, not a hang.
func TestQueryRemoteDown(t *testing.T) {
	dead, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	j := StartT(t, Options{Mode: ModeQuery, RemoteStorage: dead, RemoteTimeout: 2 * time.Second})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	start := time.Now()
	var services struct{}
	code, err := getJSON(ctx, j.QueryURL+"/api/services", &services)
	if code != http.StatusInternalServerError || err == nil || !strings.Contains(err.Error(), "Unavailable") {
		t.Errorf("/api/services with the remote storage down: %d %v, want 500 with Unavailable", code, err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the error took %s", took)
	}
}

func TestStartRejectsMissingBinary(t *testing.T) {
	_, err := Start(t.Context(), Options{Bin: "/nonexistent/jaeger", Dir: t.TempDir()})
	if err == nil {
		t.Fatal("Start of a missing binary succeeded")
	}
}

func TestStartNeedsDir(t *testing.T) {
	if _, err := Start(t.Context(), Options{Bin: "/bin/true"}); err == nil {
		t.Fatal("Start without Dir succeeded")
	}
}

// listenBusy occupies a port on 127.0.0.1 until the test ends.
func listenBusy(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// A port picked free but taken by someone else before Jaeger binds it (parallel runs): Start
// picks new ports and tries again.
func TestStartRetriesPortsTakenMeanwhile(t *testing.T) {
	busy := listenBusy(t)
	calls := 0
	orig := pickPort
	pickPort = func() (int, error) {
		calls++
		if calls == 1 {
			return busy, nil
		}
		return orig()
	}
	t.Cleanup(func() { pickPort = orig })
	j := StartT(t, Options{Mode: ModeQuery, RemoteStorage: "127.0.0.1:1"})
	if j.Ports.OTLPGRPC == busy || j.Ports.OTLPGRPC == 0 {
		t.Errorf("OTLP receiver on port %d, the busy one being %d", j.Ports.OTLPGRPC, busy)
	}
	if err := j.Exited(); err != nil {
		t.Fatal(err)
	}
}

// A port given by the caller that is busy: Start fails at once, saying so.
func TestStartFailsOnABusyGivenPort(t *testing.T) {
	busy := listenBusy(t)
	StartT(t, Options{Mode: ModeBackend}) // skips without the binary
	start := time.Now()
	_, err := Start(t.Context(), Options{Mode: ModeBackend, Dir: t.TempDir(), Ports: Ports{QueryHTTP: busy}})
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("Start on a busy port: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Start took %s to fail", took)
	}
}

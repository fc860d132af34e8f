package otlplogs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/audit/queue"
	"github.com/kelemetry/kelemetry/httpserver"
)

// recordingQueue keeps what was enqueued, or refuses with err.
type recordingQueue struct {
	mu  sync.Mutex
	got map[string][]string // cluster -> audit IDs
	err error
}

func (q *recordingQueue) Enqueue(_ context.Context, cluster string, events []*auditv1.Event) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return q.err
	}
	if q.got == nil {
		q.got = map[string][]string{}
	}
	for _, e := range events {
		q.got[cluster] = append(q.got[cluster], e.AuditID)
	}
	return nil
}
func (q *recordingQueue) EnqueueWait(ctx context.Context, cluster string, events []*auditv1.Event) error {
	return q.Enqueue(ctx, cluster, events)
}
func (q *recordingQueue) Flush(context.Context) error { return nil }
func (q *recordingQueue) Len() int                    { return 0 }
func (q *recordingQueue) Bytes() int64                { return 0 }

var _ queue.Target = (*recordingQueue)(nil)

func str(s string) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
}

func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "cloudlog", "testdata", name))
	require.NoError(t, err)
	return string(bytes.TrimSpace(b))
}

func logs(cluster string, bodies ...*commonpb.AnyValue) *logspb.ResourceLogs {
	rl := &logspb.ResourceLogs{Resource: &resourcepb.Resource{}, ScopeLogs: []*logspb.ScopeLogs{{}}}
	if cluster != "" {
		rl.Resource.Attributes = []*commonpb.KeyValue{{Key: clusterAttribute, Value: str(cluster)}}
	}
	for _, b := range bodies {
		rl.ScopeLogs[0].LogRecords = append(rl.ScopeLogs[0].LogRecords, &logspb.LogRecord{Body: b})
	}
	return rl
}

// serve runs a receiver on an OTLP listener.
// cloudwatch is what the Collector's CloudWatch Logs receiver sends for a stream of a group.
func cloudwatch(group, stream string, bodies ...*commonpb.AnyValue) *logspb.ResourceLogs {
	rl := logs("", bodies...)
	rl.Resource.Attributes = []*commonpb.KeyValue{{Key: "aws.region", Value: str("eu-west-1")},
		{Key: "cloudwatch.log.group.name", Value: str(group)}, {Key: "cloudwatch.log.stream", Value: str(stream)}}
	return rl
}

func serve(t *testing.T, cfg Config, d Deps) string {
	t.Helper()
	cfg.Enabled = true
	if cfg.Cluster == "" {
		cfg.Cluster = "fallback"
	}
	r, err := New(cfg, d)
	require.NoError(t, err)
	srv, err := httpserver.New(httpserver.Config{OTLPAddr: "127.0.0.1:0"}, httpserver.Deps{OTLP: []httpserver.Handler{r}})
	require.NoError(t, err)
	require.NoError(t, srv.Start(t.Context()))
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	return srv.OTLPAddr()
}

func export(t *testing.T, addr string, req *collogspb.ExportLogsServiceRequest) (*collogspb.ExportLogsServiceResponse, error) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	return collogspb.NewLogsServiceClient(conn).Export(t.Context(), req)
}

func TestClustersAndFormats(t *testing.T) {
	q := &recordingQueue{}
	addr := serve(t, Config{}, Deps{Queue: q})
	kv := &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: []*commonpb.KeyValue{
		{Key: "kind", Value: str("Event")}, {Key: "apiVersion", Value: str("audit.k8s.io/v1")}, {Key: "auditID", Value: str("kv-1")},
		{Key: "stage", Value: str("ResponseComplete")}, {Key: "verb", Value: str("get")},
		{Key: "requestReceivedTimestamp", Value: str("2026-11-30T17:00:00.000001Z")}, {Key: "stageTimestamp", Value: str("2026-11-30T17:00:00.000002Z")},
	}}}}
	resp, err := export(t, addr, &collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{
		// The resource names the cluster: it wins over the records'.
		logs("named", str(fixture(t, "eks-message.json")), str(fixture(t, "gke-pod-create.json"))),
		// The records name theirs: the CloudWatch log group, AKS's resource ID, GKE's label.
		logs("", str(fixture(t, "eks-cloudwatch-subscription.json")), str(fixture(t, "aks-eventhubs.json")), str(fixture(t, "gke-binding-create.json"))),
		// Neither: the configured cluster. A body the Collector parsed into a map reads as JSON.
		logs("", kv),
		// Not audit events: skipped, not rejected.
		logs("", str(fixture(t, "eks-control-message.json")), str(fixture(t, "gke-cluster-api.json"))),
		// The Collector's CloudWatch Logs receiver names the group and the stream: an EKS group
		// names the cluster, and its other streams are skipped (their bodies are no JSON).
		cloudwatch("/aws/eks/eks-2/cluster", "kube-apiserver-audit-0123", str(fixture(t, "eks-message.json"))),
		cloudwatch("/aws/eks/eks-2/cluster", "authenticator-0123", str("time=... level=info msg=access granted")),
	}})
	require.NoError(t, err)
	assert.Nil(t, resp.GetPartialSuccess())
	assert.Equal(t, map[string][]string{
		"named":      {"c401f292-94bc-48e0-9728-6a2159c079bd", "8f2c1d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f"},
		"prod-1":     {"8b18663a-fddf-4f65-8369-1048b9c35b1a", "0db67492-73ff-4665-b8f9-4f05105d5aa2"},
		"aks-prod-1": {"c401f292-94bc-48e0-9728-6a2159c079bd", "8b18663a-fddf-4f65-8369-1048b9c35b1a"},
		"gke-prod-1": {"2b3c4d5e-6f7a-4b8c-9d0e-1f2a3b4c5d6e"},
		"fallback":   {"kv-1"},
		"eks-2":      {"c401f292-94bc-48e0-9728-6a2159c079bd"},
	}, q.got)
}

// A bad record is rejected in the partial success; the good ones of the request are queued.
func TestBadRecordsLoseNothingGood(t *testing.T) {
	q := &recordingQueue{}
	addr := serve(t, Config{}, Deps{Queue: q})
	resp, err := export(t, addr, &collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{
		logs("c1", str(`{"auditID": 7}`), str(fixture(t, "eks-message.json")), str("plain text"), nil),
		logs("Bad Name!", str(fixture(t, "gke-pod-create.json"))),
	}})
	require.NoError(t, err)
	ps := resp.GetPartialSuccess()
	require.NotNil(t, ps)
	assert.EqualValues(t, 4, ps.GetRejectedLogRecords())
	assert.Contains(t, ps.GetErrorMessage(), "resourceLogs[0].scopeLogs[0].logRecords[0]")
	assert.Equal(t, map[string][]string{"c1": {"c401f292-94bc-48e0-9728-6a2159c079bd"}}, q.got)
}

func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		name     string
		queueErr error
		health   error
		grpcCode codes.Code
		httpCode int
	}{
		{"full", queue.ErrFull, nil, codes.ResourceExhausted, http.StatusTooManyRequests},
		// Not 429: a retry could never fit (the Collector drops it and logs the reason).
		{"larger than the queue", fmt.Errorf("%w: %w", queue.ErrFull, queue.ErrBatchTooLarge), nil, codes.InvalidArgument, http.StatusRequestEntityTooLarge},
		{"queue unavailable", queue.ErrUnavailable, nil, codes.Unavailable, http.StatusServiceUnavailable},
		{"stopping", queue.ErrStopped, nil, codes.Unavailable, http.StatusServiceUnavailable},
		{"sinks down", nil, errors.New("disk full"), codes.Unavailable, http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &recordingQueue{err: tc.queueErr}
			d := Deps{Queue: q}
			if tc.health != nil {
				d.Health = func(context.Context) error { return tc.health }
			}
			addr := serve(t, Config{}, d)
			req := &collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{logs("c1", str(fixture(t, "eks-message.json")))}}
			_, err := export(t, addr, req)
			require.Error(t, err)
			assert.Equal(t, tc.grpcCode, status.Code(err))

			body, err := proto.Marshal(req)
			require.NoError(t, err)
			resp, err := http.Post("http://"+addr+"/v1/logs", "application/x-protobuf", bytes.NewReader(body))
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, tc.httpCode, resp.StatusCode)
			if tc.httpCode == http.StatusRequestEntityTooLarge {
				assert.Empty(t, resp.Header.Get("Retry-After"), "not to be retried")
			} else {
				assert.Equal(t, "1", resp.Header.Get("Retry-After"))
			}
		})
	}
}

func TestHTTPJSONAndAttribute(t *testing.T) {
	q := &recordingQueue{}
	addr := serve(t, Config{BodyAttribute: "log.record.original", Format: "aks"}, Deps{Queue: q})
	rec := strings.ReplaceAll(fixture(t, "aks-eventhubs.json"), "\n", "")
	req := `{"resourceLogs":[{"resource":{},"scopeLogs":[{"logRecords":[{"body":{"stringValue":"ignored"},"attributes":[{"key":"log.record.original","value":{"stringValue":` + quote(rec) + `}}]}]}]}]}`
	resp, err := http.Post("http://"+addr+"/v1/logs", "application/json", strings.NewReader(req))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, map[string][]string{"aks-prod-1": {"c401f292-94bc-48e0-9728-6a2159c079bd", "8b18663a-fddf-4f65-8369-1048b9c35b1a"}}, q.got)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

package kelemetry_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"google.golang.org/protobuf/proto"

	"github.com/kelemetry/kelemetry"
	"github.com/kelemetry/kelemetry/httpserver"
	apiquery "github.com/kelemetry/kelemetry/internal/query"
)

// startInMemory starts the all-in-one on the in-memory store, configured by configure, until
// the test ends.
func startInMemory(t *testing.T, configure func(*kelemetry.Config)) *httpserver.Servers {
	t.Helper()
	cfg := localConfig("")
	configure(&cfg)
	var servers *httpserver.Servers
	app := fxtest.New(t, kelemetry.Module, fx.Supply(cfg, quietLogger()), fx.Populate(&servers), fx.NopLogger)
	app.RequireStart()
	t.Cleanup(app.RequireStop)
	return servers
}

// fullTree is the rollout's Deployment tree as the Jaeger API draws it, spans sorted by ID, the
// display trace ID left out.
func fullTree(t *testing.T, apiAddr string) string {
	t.Helper()
	q := url.Values{"service": {"tracing [full tree]"}, "tags": {`{"resource":"deployments","name":"demo"}`}, "start": {"0"}}
	code, body := get(t, "http://"+apiAddr+"/api/traces?"+q.Encode())
	require.Equal(t, http.StatusOK, code, body)
	var resp struct {
		Data []apiquery.JaegerTrace `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &resp))
	require.Len(t, resp.Data, 1)
	spans := resp.Data[0].Spans
	slices.SortFunc(spans, func(a, b apiquery.JaegerSpan) int { return strings.Compare(a.SpanID, b.SpanID) })
	out, err := json.MarshalIndent(spans, "", " ")
	require.NoError(t, err)
	// The display ID encodes the query's range, which ends now: the same tree read a moment
	// later has another.
	return strings.ReplaceAll(string(out), resp.Data[0].TraceID, "<display ID>")
}

// The recorded rollout sent as OTLP logs (one request per webhook batch, one record per event,
// as a Collector's filelog receiver reads the audit log) gives the same tree as through the
// webhook.
func TestOTLPLogsEqualWebhook(t *testing.T) {
	viaWebhook := startInMemory(t, func(*kelemetry.Config) {})
	postRollout(t, viaWebhook.AuditAddr())
	waitCaughtUp(t, viaWebhook.APIAddr())

	viaOTLP := startInMemory(t, func(c *kelemetry.Config) {
		c.OTLPAddr = "127.0.0.1:0"
		c.Audit.OTLPLogs.Enabled = true
	})
	data, err := os.ReadFile(filepath.Join("testdata", "rollout", "webhook-batches.jsonl"))
	require.NoError(t, err)
	records := 0
	for line := range bytes.Lines(data) {
		var batch struct {
			Items []json.RawMessage `json:"items"`
		}
		require.NoError(t, json.Unmarshal(line, &batch))
		sl := &logspb.ScopeLogs{}
		for _, item := range batch.Items {
			sl.LogRecords = append(sl.LogRecords, &logspb.LogRecord{Body: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: string(item)}}})
		}
		records += len(batch.Items)
		req := &collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{
			Resource:  &resourcepb.Resource{Attributes: []*commonpb.KeyValue{{Key: "k8s.cluster.name", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "demo"}}}}},
			ScopeLogs: []*logspb.ScopeLogs{sl},
		}}}
		body, err := proto.Marshal(req)
		require.NoError(t, err)
		resp, err := http.Post("http://"+viaOTLP.OTLPAddr()+"/v1/logs", "application/x-protobuf", bytes.NewReader(body))
		require.NoError(t, err)
		var answer collogspb.ExportLogsServiceResponse
		raw := new(bytes.Buffer)
		_, _ = raw.ReadFrom(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, raw.String())
		require.NoError(t, proto.Unmarshal(raw.Bytes(), &answer))
		require.Nil(t, answer.GetPartialSuccess(), "every record is an audit event")
	}
	require.Positive(t, records)
	waitCaughtUp(t, viaOTLP.APIAddr())
	want := fullTree(t, viaWebhook.APIAddr())
	assert.Greater(t, strings.Count(want, `"spanID"`), 10, "the rollout's tree")
	assert.Equal(t, want, fullTree(t, viaOTLP.APIAddr()))
}

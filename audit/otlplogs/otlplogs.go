// Package otlplogs receives audit events as OTLP logs, the way an OpenTelemetry Collector
// forwards the clouds' audit streams (CloudWatch Logs, Cloud Logging through Pub/Sub, Event
// Hubs, Kafka, files): each log record's body (or an attribute) is a record package cloudlog
// reads, and its events enter the audit queue as webhook batches do. A request is answered only
// once the queue holds its events (the durable queue: on disk), so what the Collector was told is
// delivered survives a restart; a full queue answers 429 / RESOURCE_EXHAUSTED and the Collector
// retries. Records that hold no audit event are skipped; records that cannot be read are
// rejected in the answer's partial success, without losing the others.
package otlplogs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/metric"
	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/grpc"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/audit/cloudlog"
	"github.com/kelemetry/kelemetry/audit/queue"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/internal/otlpin"
	"github.com/kelemetry/kelemetry/internal/timecheck"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Config configures the receiver of audit events as OTLP logs. The zero value is off.
type Config struct {
	// Enabled serves POST /v1/logs and OTLP/gRPC's LogsService on the OTLP listener
	// (httpserver.Config.OTLPAddr).
	Enabled bool `yaml:"enabled"`
	// Format is the records' format: auto (the default: recognised by their fields), json (an
	// audit event), eks, aks or gke (see package cloudlog).
	Format cloudlog.Format `yaml:"format"`
	// BodyAttribute, when set, reads the record from this log attribute instead of the body.
	BodyAttribute string `yaml:"bodyAttribute"`
	// Cluster names the cluster of records that name none: the resource attribute
	// k8s.cluster.name wins, then what the record names (EKS's log group, AKS's resource ID,
	// GKE's cluster_name label), then the resource attribute cloudwatch.log.group.name of an EKS
	// group (the Collector's CloudWatch Logs receiver), then this (default: the audit source's
	// cluster).
	Cluster string `yaml:"cluster"`
	// MaxRequestBytes bounds one request's body after decompression (default 16 MiB; 413
	// beyond it).
	MaxRequestBytes int `yaml:"maxRequestBytes"`
}

// clusterAttribute is the resource attribute that names a log's cluster.
const clusterAttribute = "k8s.cluster.name"

const defaultMaxRequestBytes = 16 << 20

// Validate reports an unknown format, a bad cluster name and a negative limit.
func (c Config) Validate() error {
	var errs []error
	if !c.Format.Valid() {
		errs = append(errs, fmt.Errorf("otlpLogs.format %q: one of auto, json, eks, aks, gke", c.Format))
	}
	if c.Cluster != "" {
		if err := aggregator.ValidateClusterName(c.Cluster); err != nil {
			errs = append(errs, fmt.Errorf("otlpLogs.cluster: %w", err))
		}
	}
	if c.MaxRequestBytes < 0 {
		errs = append(errs, errors.New("otlpLogs.maxRequestBytes is negative"))
	}
	return errors.Join(errs...)
}

// Deps are what a Receiver writes to and reports with.
type Deps struct {
	// Queue takes the events (the audit pipeline's, as the webhook's).
	Queue queue.Target
	// Health, when set, refuses requests (503 / UNAVAILABLE) while it fails: the sinks or the
	// queue cannot take events.
	Health func(ctx context.Context) error
	// MaxFutureSkew is how far ahead of this clock an event's timestamps may be (0: the
	// default, 24h; negative: no limit).
	MaxFutureSkew time.Duration
	Telemetry     telemetry.Settings
}

// The points of kelemetry.audit.otlp.records.
const (
	recordAccepted = iota
	recordSkipped
	recordRejected
)

// Receiver serves OTLP log exports into the audit queue. It is an httpserver.Handler of the
// OTLP listener.
type Receiver struct {
	cfg     Config
	d       Deps
	grpc    *grpc.Server
	records *instrument.FixedCounter
	refused metric.Int64Counter
	events  metric.Int64Counter
}

// New returns the receiver of cfg (cfg.Cluster must be set: the cluster of records that name
// none).
func New(cfg Config, d Deps) (*Receiver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Cluster == "" {
		return nil, errors.New("otlplogs: no default cluster")
	}
	if cfg.MaxRequestBytes == 0 {
		cfg.MaxRequestBytes = defaultMaxRequestBytes
	}
	if d.MaxFutureSkew == 0 {
		d.MaxFutureSkew = timecheck.DefaultMaxFutureSkew
	}
	m := instrument.NewMeter(d.Telemetry, "github.com/kelemetry/kelemetry/audit/otlplogs")
	r := &Receiver{cfg: cfg, d: d,
		records: m.FixedCounter("kelemetry.audit.otlp.records",
			"OTLP log records received as audit input, by result: accepted (their events queued), skipped (no audit event: another log of the stream), rejected (unreadable, a bad cluster name or timestamp).",
			"{record}", instrument.Sets("result", "accepted", "skipped", "rejected")...),
		refused: m.Counter("kelemetry.audit.otlp.refused",
			"OTLP log requests refused whole, by reason: full (429 / RESOURCE_EXHAUSTED, retried), unavailable (503 / UNAVAILABLE), too_large.",
			"{request}", instrument.Sets("reason", "full", "unavailable", "too_large")...),
		events: m.Counter("kelemetry.audit.otlp.events", "Audit events queued from OTLP log records.", "{event}"),
	}
	r.grpc = grpc.NewServer(grpc.MaxRecvMsgSize(cfg.MaxRequestBytes))
	collogspb.RegisterLogsServiceServer(r.grpc, logsService{r: r})
	return r, nil
}

// Register mounts POST /v1/logs and OTLP/gRPC's LogsService/Export.
func (r *Receiver) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/logs", func(w http.ResponseWriter, req *http.Request) {
		otlpin.ServeHTTP(w, req, r.cfg.MaxRequestBytes, func() *collogspb.ExportLogsServiceRequest { return &collogspb.ExportLogsServiceRequest{} }, r.accept)
	})
	mux.Handle("POST /opentelemetry.proto.collector.logs.v1.LogsService/Export", r.grpc)
}

type logsService struct {
	r *Receiver
	collogspb.UnimplementedLogsServiceServer
}

func (s logsService) Export(ctx context.Context, req *collogspb.ExportLogsServiceRequest) (*collogspb.ExportLogsServiceResponse, error) {
	resp, err := s.r.accept(ctx, req)
	return resp, otlpin.GRPCError(err)
}

// accept decodes the request's records and queues their events, cluster by cluster.
func (r *Receiver) accept(ctx context.Context, req *collogspb.ExportLogsServiceRequest) (*collogspb.ExportLogsServiceResponse, error) {
	if r.d.Health != nil {
		if err := r.d.Health(ctx); err != nil {
			r.refused.Add(ctx, 1, metric.WithAttributeSet(instrument.Sets("reason", "unavailable")[0]))
			return nil, fmt.Errorf("%w: %w", otlpin.ErrUnavailable, err)
		}
	}
	byCluster := map[string][]*auditv1.Event{}
	var accepted, skipped, rejected int
	var firstErr string
	reject := func(where string, err error) {
		rejected++
		if firstErr == "" {
			firstErr = where + ": " + err.Error()
		}
	}
	for i, rl := range req.GetResourceLogs() {
		// The cluster's name; the Collector's CloudWatch Logs receiver names the log group and
		// stream, which name an EKS cluster and its audit streams.
		resCluster, groupCluster, otherStream := "", "", false
		for _, kv := range rl.GetResource().GetAttributes() {
			switch kv.GetKey() {
			case clusterAttribute:
				resCluster = kv.GetValue().GetStringValue()
			case "cloudwatch.log.group.name":
				groupCluster = cloudlog.EKSCluster(kv.GetValue().GetStringValue())
			case "cloudwatch.log.stream":
				otherStream = !cloudlog.EKSAuditStream(kv.GetValue().GetStringValue())
			}
		}
		if groupCluster == "" {
			otherStream = false // not an EKS control-plane group: the stream says nothing
		}
		for j, sl := range rl.GetScopeLogs() {
			for k, lr := range sl.GetLogRecords() {
				if otherStream {
					skipped++
					continue
				}
				where := "resourceLogs[" + strconv.Itoa(i) + "].scopeLogs[" + strconv.Itoa(j) + "].logRecords[" + strconv.Itoa(k) + "]"
				data, err := r.recordData(lr.GetBody(), lr.GetAttributes())
				if err != nil {
					reject(where, err)
					continue
				}
				rec, err := cloudlog.Decode(r.cfg.Format, data)
				if errors.Is(err, cloudlog.ErrNotAuditEvent) {
					skipped++
					continue
				}
				if err != nil {
					reject(where, err)
					continue
				}
				cluster := cmpOr(resCluster, rec.Cluster, groupCluster, r.cfg.Cluster)
				if err := aggregator.ValidateClusterName(cluster); err != nil {
					reject(where, fmt.Errorf("cluster %q: %w", cluster, err))
					continue
				}
				kept, problems := timecheck.FilterEventTimes(rec.Events, time.Now(), r.d.MaxFutureSkew, func(int) string { return "" })
				if len(problems) > 0 {
					reject(where, errors.New(problems[0].Message))
				}
				if len(kept) > 0 {
					accepted++
					byCluster[cluster] = append(byCluster[cluster], kept...)
				}
			}
		}
	}
	clusters := make([]string, 0, len(byCluster))
	for c := range byCluster {
		clusters = append(clusters, c)
	}
	slices.Sort(clusters)
	for _, c := range clusters {
		if err := queue.EnqueueParts(ctx, r.d.Queue, c, byCluster[c]); err != nil {
			return nil, r.refuse(ctx, len(byCluster[c]), err)
		}
		r.events.Add(ctx, int64(len(byCluster[c])))
	}
	r.records.Add(recordAccepted, int64(accepted))
	r.records.Add(recordSkipped, int64(skipped))
	r.records.Add(recordRejected, int64(rejected))
	resp := &collogspb.ExportLogsServiceResponse{}
	if rejected > 0 {
		resp.PartialSuccess = &collogspb.ExportLogsPartialSuccess{RejectedLogRecords: int64(rejected),
			ErrorMessage: strconv.Itoa(rejected) + " records hold no readable audit event; the first: " + firstErr}
	}
	return resp, nil
}

// refuse maps a queue's refusal to the answer that makes the Collector retry, or not.
func (r *Receiver) refuse(ctx context.Context, n int, err error) error {
	reason, kind := "unavailable", otlpin.ErrUnavailable
	switch {
	case errors.Is(err, queue.ErrBatchTooLarge): // first: it wraps ErrFull too
		reason, kind = "too_large", otlpin.ErrTooLarge
	case errors.Is(err, queue.ErrFull):
		reason, kind = "full", otlpin.ErrFull
	case errors.Is(err, queue.ErrUnavailable), errors.Is(err, queue.ErrStopped):
	default:
		return fmt.Errorf("enqueue %d events: %w", n, err)
	}
	r.refused.Add(ctx, 1, metric.WithAttributeSet(instrument.Sets("reason", reason)[0]))
	return fmt.Errorf("%w: enqueue %d events: %w", kind, n, err)
}

func cmpOr(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// recordData is the record a log holds: its body, or the configured attribute; a string or
// bytes as they are, a map (a Collector that parsed the JSON) as JSON.
func (r *Receiver) recordData(body *commonpb.AnyValue, attrs []*commonpb.KeyValue) ([]byte, error) {
	v := body
	if r.cfg.BodyAttribute != "" {
		v = nil
		for _, kv := range attrs {
			if kv.GetKey() == r.cfg.BodyAttribute {
				v = kv.GetValue()
			}
		}
		if v == nil {
			return nil, fmt.Errorf("no attribute %q", r.cfg.BodyAttribute)
		}
	}
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return []byte(x.StringValue), nil
	case *commonpb.AnyValue_BytesValue:
		return x.BytesValue, nil
	case *commonpb.AnyValue_KvlistValue:
		return json.Marshal(anyValue(v))
	case nil:
		return nil, errors.New("the body is empty")
	}
	return nil, fmt.Errorf("the body is a %T, not a record", v.GetValue())
}

// anyValue is an OTLP value as JSON data.
func anyValue(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BytesValue:
		return x.BytesValue
	case *commonpb.AnyValue_ArrayValue:
		out := make([]any, 0, len(x.ArrayValue.GetValues()))
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, anyValue(e))
		}
		return out
	case *commonpb.AnyValue_KvlistValue:
		out := make(map[string]any, len(x.KvlistValue.GetValues()))
		for _, kv := range x.KvlistValue.GetValues() {
			out[kv.GetKey()] = anyValue(kv.GetValue())
		}
		return out
	}
	return nil
}

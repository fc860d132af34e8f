package query

import (
	"cmp"
	"slices"
	"strconv"

	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
)

// jaegerResponse is the envelope of Jaeger Query's HTTP API.
type jaegerResponse struct {
	Data   any           `json:"data"`
	Total  int           `json:"total"`
	Limit  int           `json:"limit"`
	Offset int           `json:"offset"`
	Errors []JaegerError `json:"errors"`
	// Truncated is a Kelemetry extension: when a budget of the request ran out, its message
	// (which errors also holds, as stock Jaeger UI shows those).
	Truncated string `json:"truncated,omitempty"`
	// More (a Kelemetry extension of a search) is set when more results exist than the limit
	// allowed; Unshown counts the found objects that no result shown holds (several may make one
	// result), and ScanCut says that the search stopped counting found objects at its scan
	// limit, so that more exist than Unshown.
	More    bool `json:"more,omitempty"`
	Unshown int  `json:"unshown,omitempty"`
	ScanCut bool `json:"scanCut,omitempty"`
}

// JaegerError is one error in a jaegerResponse.
type JaegerError struct {
	Code    int    `json:"code,omitempty"`
	Msg     string `json:"msg"`
	TraceID string `json:"traceID,omitempty"`
}

// JaegerTrace is a trace in Jaeger UI's JSON model.
type JaegerTrace struct {
	TraceID   string                   `json:"traceID"`
	Spans     []JaegerSpan             `json:"spans"`
	Processes map[string]JaegerProcess `json:"processes"`
	Warnings  []string                 `json:"warnings"`
}

// JaegerSpan is a span in Jaeger UI's JSON model. Times are Unix microseconds.
type JaegerSpan struct {
	TraceID       string            `json:"traceID"`
	SpanID        string            `json:"spanID"`
	OperationName string            `json:"operationName"`
	References    []JaegerReference `json:"references"`
	StartTime     int64             `json:"startTime"`
	Duration      int64             `json:"duration"`
	Tags          []JaegerKeyValue  `json:"tags"`
	Logs          []JaegerLog       `json:"logs"`
	ProcessID     string            `json:"processID"`
	Warnings      []string          `json:"warnings"`
}

// JaegerReference links a span to its parent.
type JaegerReference struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

// JaegerKeyValue is a tag or log field.
type JaegerKeyValue struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// JaegerLog is a span log.
type JaegerLog struct {
	Timestamp int64            `json:"timestamp"`
	Fields    []JaegerKeyValue `json:"fields"`
}

// JaegerProcess is the service a span belongs to.
type JaegerProcess struct {
	ServiceName string           `json:"serviceName"`
	Tags        []JaegerKeyValue `json:"tags"`
}

// jaegerTraceID formats a trace ID as Jaeger does: 16 hex digits when the high half is zero.
func jaegerTraceID(id trace.TraceID) string {
	s := id.String()
	if s[:16] == "0000000000000000" {
		return s[16:]
	}
	return s
}

func micros(t interface{ UnixMicro() int64 }) int64 { return t.UnixMicro() }

func str(k, v string) JaegerKeyValue { return JaegerKeyValue{Key: k, Type: "string", Value: v} }

// ToJaeger converts the spans of one trace, as stored, into Jaeger's trace model. Each span
// source (object, link, audit, event, ...) becomes one process.
func ToJaeger(id trace.TraceID, spans []*aggregator.Span) JaegerTrace {
	tid := jaegerTraceID(id)
	out := JaegerTrace{TraceID: tid, Spans: make([]JaegerSpan, 0, len(spans)), Processes: map[string]JaegerProcess{}}
	procIDs := map[string]string{}
	sources := make([]string, 0, 4)
	for _, sp := range spans {
		if _, ok := procIDs[sp.Source]; !ok {
			procIDs[sp.Source] = ""
			sources = append(sources, sp.Source)
		}
	}
	slices.Sort(sources)
	for i, s := range sources {
		pid := "p" + strconv.Itoa(i+1)
		procIDs[s] = pid
		out.Processes[pid] = JaegerProcess{ServiceName: s, Tags: []JaegerKeyValue{}}
	}
	for _, sp := range spans {
		out.Spans = append(out.Spans, jaegerSpan(tid, sp, procIDs[sp.Source]))
	}
	slices.SortStableFunc(out.Spans, func(a, b JaegerSpan) int {
		return cmp.Or(cmp.Compare(a.StartTime, b.StartTime), cmp.Compare(a.SpanID, b.SpanID))
	})
	return out
}

func jaegerSpan(tid string, sp *aggregator.Span, pid string) JaegerSpan {
	js := JaegerSpan{
		TraceID:       tid,
		SpanID:        sp.SpanID.String(),
		OperationName: sp.Name,
		References:    []JaegerReference{},
		StartTime:     micros(sp.Start),
		Duration:      sp.End.Sub(sp.Start).Microseconds(),
		ProcessID:     pid,
		Logs:          make([]JaegerLog, 0, len(sp.Logs)),
	}
	if sp.ParentID.IsValid() {
		js.References = append(js.References, JaegerReference{RefType: "CHILD_OF", TraceID: tid, SpanID: sp.ParentID.String()})
	}
	o := sp.Object
	js.Tags = append(make([]JaegerKeyValue, 0, 8+len(sp.Attributes)),
		str("kelemetry.span.kind", string(sp.Kind)),
		str(aggregator.AttrCluster, o.Cluster),
		str(aggregator.AttrGroup, o.Group),
		str(aggregator.AttrResource, o.Resource),
		str(aggregator.AttrNamespace, o.Namespace),
		str(aggregator.AttrName, o.Name),
	)
	if o.Version != "" {
		js.Tags = append(js.Tags, str(aggregator.AttrVersion, o.Version))
	}
	if o.UID != "" {
		js.Tags = append(js.Tags, str(aggregator.AttrUID, o.UID))
	}
	for _, a := range sp.Attributes {
		js.Tags = append(js.Tags, str(a.Key, a.Value))
	}
	if sp.Error {
		js.Tags = append(js.Tags, JaegerKeyValue{Key: "error", Type: "bool", Value: true})
	}
	for _, l := range sp.Logs {
		fields := append(make([]JaegerKeyValue, 0, 2+len(l.Attributes)), str("event", l.Type), str("message", l.Message))
		for _, a := range l.Attributes {
			fields = append(fields, str(a.Key, a.Value))
		}
		js.Logs = append(js.Logs, JaegerLog{Timestamp: micros(l.Time), Fields: fields})
	}
	return js
}

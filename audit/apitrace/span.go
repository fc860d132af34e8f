package apitrace

import (
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/kelemetry/kelemetry/aggregator"
)

// auditIDKeys are the attribute keys that name a request's audit ID: kube-apiserver's
// ("audit-id"), and the forms other senders use.
var auditIDKeys = [...]string{"audit-id", "audit_id", "auditID", "k8s.audit.id", aggregator.AttrAuditID}

// defaultService names the sender of spans whose resource has no service.name.
const defaultService = "kube-apiserver"

// rspan is one received span, as the join keeps it.
type rspan struct {
	traceID    [16]byte
	id, parent [8]byte
	name       string
	service    string
	// auditID is the span's own audit ID attribute ("" when it has none).
	auditID string
	// root marks the entry of a request: a server span with an audit ID, or a span without a
	// parent. It goes right under the event span; every other span under its parent.
	root bool
	// skip marks a span whose attributes say the audit consumer writes no event for its
	// request: a read (GET, LIST, WATCH), or a write of a Kubernetes Event (those come through
	// the Event source).
	skip       bool
	start, end time.Time
	attrs      aggregator.Attrs
	logs       []aggregator.Log
	err        bool
	size       int64
}

// idHex is the span's ID as the join names it in derived IDs.
func (s *rspan) idHex() string { return hex.EncodeToString(s.id[:]) }

// spansOf converts the spans of req; spans without a valid trace or span ID are counted in bad.
func spansOf(req *coltracepb.ExportTraceServiceRequest) (out []*rspan, bad int) {
	for _, rs := range req.GetResourceSpans() {
		service := defaultService
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				if v := anyString(kv.GetValue()); v != "" {
					service = v
				}
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s, ok := convertSpan(sp, service)
				if !ok {
					bad++
					continue
				}
				out = append(out, s)
			}
		}
	}
	return out, bad
}

func convertSpan(sp *tracepb.Span, service string) (*rspan, bool) {
	s := &rspan{name: sp.GetName(), service: service}
	if len(sp.GetTraceId()) != 16 || len(sp.GetSpanId()) != 8 {
		return nil, false
	}
	copy(s.traceID[:], sp.GetTraceId())
	copy(s.id[:], sp.GetSpanId())
	if s.traceID == [16]byte{} || s.id == [8]byte{} {
		return nil, false
	}
	if p := sp.GetParentSpanId(); len(p) == 8 {
		copy(s.parent[:], p)
	}
	s.start = unixNano(sp.GetStartTimeUnixNano())
	s.end = unixNano(sp.GetEndTimeUnixNano())
	if s.end.Before(s.start) {
		s.end = s.start
	}
	server := sp.GetKind() == tracepb.Span_SPAN_KIND_SERVER
	var method string
	s.size = int64(256 + len(s.name) + len(service))
	s.attrs = make(aggregator.Attrs, 0, len(sp.GetAttributes()))
	for _, kv := range sp.GetAttributes() {
		k, v := kv.GetKey(), anyString(kv.GetValue())
		switch k {
		case "verb":
			switch strings.ToUpper(v) {
			case "GET", "LIST", "WATCH", "WATCHLIST":
				s.skip = true
			}
		case "resource":
			if v == "events" {
				s.skip = true
			}
		case "http.method", "http.request.method":
			method = v
		}
		if isAuditIDKey(k) {
			if v != "" && v != "unknown" && s.auditID == "" {
				s.auditID = truncateID(v)
			}
			continue
		}
		s.attrs = append(s.attrs, aggregator.Attr{Key: k, Value: v})
		s.size += int64(32 + len(k) + len(v))
	}
	if server && s.auditID != "" && strings.EqualFold(method, "GET") {
		s.skip = true
	}
	s.root = s.parent == [8]byte{} || (server && s.auditID != "")
	for _, ev := range sp.GetEvents() {
		l := aggregator.Log{Time: unixNano(ev.GetTimeUnixNano()), Type: "event", Message: ev.GetName()}
		for _, kv := range ev.GetAttributes() {
			v := anyString(kv.GetValue())
			l.Attributes = append(l.Attributes, aggregator.Attr{Key: kv.GetKey(), Value: v})
			s.size += int64(32 + len(kv.GetKey()) + len(v))
		}
		s.logs = append(s.logs, l)
		s.size += int64(64 + len(l.Message))
	}
	if st := sp.GetStatus(); st.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
		s.err = true
		if msg := st.GetMessage(); msg != "" {
			s.logs = append(s.logs, aggregator.Log{Time: s.end, Type: aggregator.LogTypeError, Message: msg})
			s.size += int64(64 + len(msg))
		}
	}
	return s, true
}

func isAuditIDKey(k string) bool {
	for _, a := range auditIDKeys {
		if k == a {
			return true
		}
	}
	return false
}

// truncateID is an audit ID as kube-apiserver puts it in spans: at most maxAuditIDLength bytes.
func truncateID(id string) string {
	if len(id) > maxAuditIDLength {
		return id[:maxAuditIDLength]
	}
	return id
}

func unixNano(ns uint64) time.Time {
	if ns == 0 || ns > 1<<63-1 {
		return time.Time{}
	}
	return time.Unix(0, int64(ns)).UTC()
}

// anyString renders an attribute value as text: strings as they are, other scalars in their
// usual form, arrays and maps as a bracketed list.
func anyString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	case *commonpb.AnyValue_BytesValue:
		return hex.EncodeToString(x.BytesValue)
	case *commonpb.AnyValue_ArrayValue:
		parts := make([]string, 0, len(x.ArrayValue.GetValues()))
		for _, e := range x.ArrayValue.GetValues() {
			parts = append(parts, anyString(e))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case *commonpb.AnyValue_KvlistValue:
		parts := make([]string, 0, len(x.KvlistValue.GetValues()))
		for _, kv := range x.KvlistValue.GetValues() {
			parts = append(parts, kv.GetKey()+"="+anyString(kv.GetValue()))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return ""
}

package query

import (
	"encoding/json"
	"strconv"

	"github.com/kelemetry/kelemetry/internal/jsonscan"
)

// appendSpanJSON appends s encoded exactly as encoding/json encodes it (field order, nil slices as
// null, HTML-safe strings), without reflection: a large tree's response is mostly spans, and each
// is measured by the render budget and then written. Strings of plain printable ASCII are copied
// as they are; any other string, and every value that is not a string, bool or integer, is left to
// encoding/json, so the bytes are the same whatever they hold.
func appendSpanJSON(b []byte, s *JaegerSpan) []byte {
	b = append(b, `{"traceID":`...)
	b = appendJSONString(b, s.TraceID)
	b = append(b, `,"spanID":`...)
	b = appendJSONString(b, s.SpanID)
	b = append(b, `,"operationName":`...)
	b = appendJSONString(b, s.OperationName)
	b = append(b, `,"references":`...)
	if s.References == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, r := range s.References {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"refType":`...)
			b = appendJSONString(b, r.RefType)
			b = append(b, `,"traceID":`...)
			b = appendJSONString(b, r.TraceID)
			b = append(b, `,"spanID":`...)
			b = appendJSONString(b, r.SpanID)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"startTime":`...)
	b = strconv.AppendInt(b, s.StartTime, 10)
	b = append(b, `,"duration":`...)
	b = strconv.AppendInt(b, s.Duration, 10)
	b = append(b, `,"tags":`...)
	b = appendKeyValuesJSON(b, s.Tags)
	b = append(b, `,"logs":`...)
	if s.Logs == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range s.Logs {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"timestamp":`...)
			b = strconv.AppendInt(b, s.Logs[i].Timestamp, 10)
			b = append(b, `,"fields":`...)
			b = appendKeyValuesJSON(b, s.Logs[i].Fields)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"processID":`...)
	b = appendJSONString(b, s.ProcessID)
	b = append(b, `,"warnings":`...)
	if s.Warnings == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, w := range s.Warnings {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, w)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

func appendKeyValuesJSON(b []byte, kvs []JaegerKeyValue) []byte {
	if kvs == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range kvs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"key":`...)
		b = appendJSONString(b, kvs[i].Key)
		b = append(b, `,"type":`...)
		b = appendJSONString(b, kvs[i].Type)
		b = append(b, `,"value":`...)
		b = appendJSONValue(b, kvs[i].Value)
		b = append(b, '}')
	}
	return append(b, ']')
}

func appendJSONValue(b []byte, v any) []byte {
	switch v := v.(type) {
	case string:
		return appendJSONString(b, v)
	case bool:
		return strconv.AppendBool(b, v)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case int:
		return strconv.AppendInt(b, int64(v), 10)
	case nil:
		return append(b, "null"...)
	}
	out, err := json.Marshal(v)
	if err != nil {
		// encoding/json would fail the whole response; a value it cannot encode is drawn as null.
		return append(b, "null"...)
	}
	return append(b, out...)
}

// appendJSONString appends s quoted: ASCII that needs no escape as it is (jsonscan.HTMLPlain),
// anything else (escapes, HTML-sensitive characters, non-ASCII) by encoding/json.
func appendJSONString(b []byte, s string) []byte {
	if !jsonscan.HTMLPlain(s) {
		out, _ := json.Marshal(s) // a string always encodes
		return append(b, out...)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

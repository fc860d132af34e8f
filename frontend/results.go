package frontend

import "github.com/kelemetry/kelemetry/internal/query"

// The JSON the HTTP APIs answer with, for clients decoding it.
type (
	// JaegerTrace is one trace of Jaeger Query's API (GET /api/traces/{id}, each of the data
	// of GET /api/traces), and JaegerSpan one of its spans.
	JaegerTrace = query.JaegerTrace
	JaegerSpan  = query.JaegerSpan
	// ObjectsResponse is the answer of GET /api/objects, ObjectResult one of its objects with
	// its stored windows.
	ObjectsResponse = query.ObjectsResponse
	ObjectResult    = query.ObjectResult
	// CriticalPath is the answer of GET /api/critical-path/{id}.
	CriticalPath = query.CriticalPath
)

// Package frontend serves stored traces. Today it has the native API: object lookup
// (GET /api/objects) and the spans of one stored trace in Jaeger's JSON trace shape
// (GET /api/stored-traces/{traceID}). The query engine, display modes and the Jaeger-compatible
// search API build on the same conversion (see jaeger.go).
package frontend

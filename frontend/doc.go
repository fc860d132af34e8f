// Package frontend serves stored traces.
//
// The native API (NativeAPI) looks up objects (GET /api/objects) and returns the spans of one
// stored trace in Jaeger's JSON trace shape (GET /api/stored-traces/{traceID}).
//
// The query engine (Engine) finds objects by key fields, event attributes and a time range,
// follows their link spans per LinkMode (ancestors, descendants, full tree) breadth-first with
// sorted edges and per-level and total budgets, and merges the windows of each object into one
// Graph per connected group. Render draws a Graph in a DisplayMode (tracing, grouped, tree,
// timeline), each a short pipeline of transform steps over one node tree.
//
// JaegerAPI serves the engine through Jaeger Query's HTTP API (services are display modes,
// operations are clusters) plus GET /redirect. Its trace IDs are DisplayIDs: stateless, they
// name the mode, the time range and the anchor object, and resolve against the store alone.
//
// UIAPI serves what the built-in web UI (package frontend/ui) needs besides that: short search
// results (GET /api/ui/search) and search-field suggestions from stored data
// (GET /api/ui/suggestions).
package frontend

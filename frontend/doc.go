// Package frontend is the query side: it reads stored traces (a store.Reader), turns them into
// the trees users look at, and serves them over HTTP on the API listener (Module, New).
//
// The query engine (Engine, NewEngine) finds objects by key fields, event attributes and a time
// range, follows their link spans (ancestors, descendants, full tree) breadth-first with per-level
// and total budgets, and merges the windows of each object into one result per connected group,
// drawn in a display mode (tracing, grouped, tree, timeline). Every request has budgets (Config:
// spans read, bytes rendered, time); past one the answer keeps what fit and says it is
// truncated. At most Config.MaxConcurrent heavy requests run at once; the others wait up to
// Config.QueueWait and are then refused (503 with Retry-After).
//
// The HTTP APIs that New serves with one Engine and its limits:
//
//   - Jaeger Query's HTTP API (services are display modes, operations are clusters), so Jaeger
//     UI and Grafana work unchanged, plus GET /redirect. Its trace IDs are stateless display IDs
//     that open on any replica; a merge ID joins several results into one trace.
//   - The native API: what is stored, window by window (GET /api/objects,
//     /api/stored-traces/{id}), and an object over time (GET /api/objects/at, /diff, /history).
//     Redacted values stay redaction markers.
//   - What the web UI (package frontend/ui) needs besides: short search results and suggestions
//     (GET /api/ui/search, /api/ui/suggestions), and the critical path
//     (GET /api/critical-path/{id}, /api/controller-times/{id}), which follows causal rules
//     (CausalRule, DefaultCausalRules, Config.CausalRules).
//
// The storage API (package storageapi) serves the same engine over Jaeger's remote storage
// gRPC API, with the same budgets and limit. Package frontendtest holds the recorded rollout
// replayed into a memory store, which the query tests share.
package frontend

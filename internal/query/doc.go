// Package query is the query engine of package frontend and its HTTP APIs: it reads stored
// traces (a store.Reader), turns them into the trees users look at, and serves them over HTTP.
// Package frontend (Config, Module, New) and package storageapi build on it.
//
// The query engine (Engine) finds objects by key fields, event attributes and a time range,
// follows their link spans per linkMode (ancestors, descendants, full tree) breadth-first with
// sorted edges and per-level and total budgets, and merges the windows of each object into one
// Graph per connected group. Render draws a Graph in a displayMode (tracing, grouped, tree,
// timeline). Every request has budgets (Config: spans read, bytes rendered, time); past one the
// answer keeps what fit and says it is truncated, in the places Jaeger UI and the web UI show.
// At most Config.MaxConcurrent heavy requests run at once; the others wait up to QueueWait and
// are then refused (ErrBusy, 503 with Retry-After).
//
// The HTTP APIs, served on the API listener (Serve, which frontend.New calls) with one Engine
// and its limits:
//
//   - JaegerAPI: Jaeger Query's HTTP API (services are display modes, operations are clusters),
//     so Jaeger UI and Grafana work unchanged, plus GET /redirect. Its trace IDs are DisplayIDs:
//     stateless, they name the mode, the time range and the anchor object, and open on any
//     replica. A merge ID (mergeID, parseMergeID) joins up to maxMergeMembers results into one
//     trace (GET /api/traces/{mergeID}, /api/traces/merge; mergeGraphs).
//   - NativeAPI: what is stored, window by window (GET /api/objects, /api/stored-traces/{id}),
//     and an object over time: objectAt rebuilds it at any moment from its nearest stored
//     snapshot and the diffs after it (GET /api/objects/at), objectDiffBetween compares two
//     moments (/diff), objectHistoryBetween lists its stored writes (/history, the UI's time
//     slider). Redacted values stay redaction markers.
//   - UIAPI: what the web UI (package frontend/ui) needs besides: short search results and
//     suggestions (GET /api/ui/search, /api/ui/suggestions), and the critical path
//     (GET /api/critical-path/{id}, /api/controller-times/{id}): analyzeCritical follows causal
//     rules (CausalRule, DefaultCausalRules, Config.CausalRules) from the tree's first write to
//     its last, attributing the waits to controllers and measuring their reaction times, for
//     one result or a merge.
//
// The storage API (package storageapi) serves the same engine over Jaeger's remote storage
// gRPC API, with the same budgets and limit (Engine.Acquire). Package frontend/frontendtest holds
// the recorded rollout replayed into a memory store, which the query tests share.
package query

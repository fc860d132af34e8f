// Package httpserver runs Kelemetry's HTTP listeners: the audit webhook listener and the API
// listener (query APIs, web UI, /metrics, /healthz). Other modules contribute handlers to either
// listener through value groups (AsAuditHandler, AsAPIHandler); a listener that no module
// contributes to is not opened, so a query-only binary has no webhook port and an ingest-only
// binary no API port. When both addresses are equal, one listener serves both. Module also
// serves the Prometheus provider of telemetry.Module at GET /metrics on the API listener, and
// counts with telemetry.Settings' meter provider (telemetry itself depends on no listener).
//
// Both listeners bind to localhost by default. Each can serve TLS (TLSConfig: certificate files
// re-read when they change, TLS 1.2 at least) and authenticate its clients: the audit listener
// with client certificates of a CA or bearer tokens (AuditAuthConfig), the API listener with bearer
// tokens or an authenticating proxy's user header (APIAuthConfig). Unauthenticated requests get
// 401 without their body being read, are counted in kelemetry.http.auth.rejected and logged
// rate-limited; GET /healthz stays open and then tells only the status; the web UI's pages and
// static files stay open.
//
// Each listener keeps at most Config.MaxConnections connections open (1024 by default): one more
// is reset as soon as it is accepted; idle keep-alive connections are closed after
// Timeouts.Idle and silent ones after Timeouts.ReadHeader. What any peer can make a listener log
// is rate-limited (a burst of 5, then one line per 30s, each saying how many were suppressed) and
// counted by listener: refused connections (kelemetry.listener.refused_connections), failed TLS
// handshakes (kelemetry.listener.tls_handshake_errors), 401 answers. Guard does this for other
// listeners too (the storage API's gRPC one).
//
// Server is usable on its own: Start binds the address (so a busy port fails start-up) and serves
// in the background; Stop shuts down gracefully.
package httpserver

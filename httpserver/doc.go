// Package httpserver runs Kelemetry's HTTP listeners: the audit webhook listener and the API
// listener (query APIs, web UI, /metrics, /healthz). Other modules contribute handlers to either
// listener through value groups (AsAuditHandler, AsAPIHandler); a listener that no module
// contributes to is not opened, so a query-only binary has no webhook port and an ingest-only
// binary no API port. When both addresses are equal, one listener serves both.
//
// Server is usable on its own: Start binds the address (so a busy port fails start-up) and serves
// in the background; Stop shuts down gracefully.
package httpserver

package frontendtest

// Names the external tests use; the package does not export them.
var (
	ReplayAuditLog = replayAuditLog
)

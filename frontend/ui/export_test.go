package ui

// Names the external tests use; the package does not export them.
const (
	ContentSecurityPolicy = contentSecurityPolicy
)

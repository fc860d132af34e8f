package storageapi

// Names the external tests use; the package does not export them.
var (
	NewListener = newListener
	NewServer   = newServer
)

package event

// Names the external tests use; the package does not export them.
const (
	SourceName = sourceName
)

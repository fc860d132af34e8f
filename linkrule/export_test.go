package linkrule

// Names the external tests use; the package does not export them.
const (
	LinkerName = linkerName
)

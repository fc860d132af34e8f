package query

// Names the external tests use; the package does not export them.
type (
	ControllerTimes   = controllerTimes
	DisplayMode       = displayMode
	Edge              = edge
	LinkMode          = linkMode
	Object            = object
	SuggestedResource = suggestedResource
	Suggestions       = suggestions
)

const (
	DefaultAPILimit = defaultAPILimit
	DisplayGrouped  = displayGrouped
	DisplayTimeline = displayTimeline
	DisplayTracing  = displayTracing
	LinkAncestors   = linkAncestors
	LinkDescendants = linkDescendants
	LinkNone        = linkNone
	MaxAPILimit     = maxAPILimit
)

var (
	AnalyzeCritical      = analyzeCritical
	ControllerName       = controllerName
	JaegerTraceID        = jaegerTraceID
	NewDisplayID         = newDisplayID
	ObjectAt             = objectAt
	ObjectDiffBetween    = objectDiffBetween
	ObjectHistoryBetween = objectHistoryBetween
	ParseDisplayID       = parseDisplayID
	AppendSpanJSON       = appendSpanJSON
)

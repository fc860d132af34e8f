package auditv1

import (
	"encoding/json"
	"time"
)

// Event is the part of an audit.k8s.io/v1 Event that Kelemetry reads. Request and response
// bodies stay raw JSON until something needs them. The JSON field names are those of
// k8s.io/apiserver/pkg/apis/audit/v1.
type Event struct {
	Kind                     string            `json:"kind,omitempty"`
	APIVersion               string            `json:"apiVersion,omitempty"`
	Level                    string            `json:"level,omitempty"`
	AuditID                  string            `json:"auditID"`
	Stage                    string            `json:"stage"`
	RequestURI               string            `json:"requestURI,omitempty"`
	Verb                     string            `json:"verb"`
	User                     UserInfo          `json:"user"`
	ImpersonatedUser         *UserInfo         `json:"impersonatedUser,omitempty"`
	SourceIPs                []string          `json:"sourceIPs,omitempty"`
	UserAgent                string            `json:"userAgent,omitempty"`
	ObjectRef                *ObjectReference  `json:"objectRef,omitempty"`
	ResponseStatus           *Status           `json:"responseStatus,omitempty"`
	RequestObject            json.RawMessage   `json:"requestObject,omitempty"`
	ResponseObject           json.RawMessage   `json:"responseObject,omitempty"`
	RequestReceivedTimestamp time.Time         `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time         `json:"stageTimestamp"`
	Annotations              map[string]string `json:"annotations,omitempty"`

	// resp is what the decoder read of ResponseObject's metadata (see responseMeta); nil for
	// events that did not come from it.
	resp *respMeta
}

// UserInfo is the authenticated user of a request.
type UserInfo struct {
	Username string   `json:"username,omitempty"`
	UID      string   `json:"uid,omitempty"`
	Groups   []string `json:"groups,omitempty"`
}

// ObjectReference names the object a request is about.
type ObjectReference struct {
	Resource        string `json:"resource,omitempty"`
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name,omitempty"`
	UID             string `json:"uid,omitempty"`
	APIGroup        string `json:"apiGroup,omitempty"`
	APIVersion      string `json:"apiVersion,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
	Subresource     string `json:"subresource,omitempty"`
}

// Status is the response status of a request (a metav1.Status).
type Status struct {
	Status  string         `json:"status,omitempty"`
	Message string         `json:"message,omitempty"`
	Reason  string         `json:"reason,omitempty"`
	Details *StatusDetails `json:"details,omitempty"`
	Code    int32          `json:"code,omitempty"`
}

// StatusDetails carries the causes of a failed request.
type StatusDetails struct {
	Causes []StatusCause `json:"causes,omitempty"`
}

// StatusCause is one cause of a failed request.
type StatusCause struct {
	Type    string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	Field   string `json:"field,omitempty"`
}

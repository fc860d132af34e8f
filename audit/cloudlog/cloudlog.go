package cloudlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kelemetry/kelemetry/audit/auditv1"
)

// Format names the shape of a record.
type Format string

// Formats of Decode.
const (
	// FormatAuto recognises the others by their fields.
	FormatAuto Format = "auto"
	// FormatJSON is an audit.k8s.io/v1 Event (EKS's CloudWatch Logs messages are these).
	FormatJSON Format = "json"
	// FormatEKS is FormatJSON, or a CloudWatch Logs subscription envelope whose logEvents'
	// messages are events.
	FormatEKS Format = "eks"
	// FormatAKS is an Azure diagnostic record of category kube-audit or kube-audit-admin whose
	// properties.log is the event, or the Event Hubs envelope {"records": [...]} of such records.
	FormatAKS Format = "aks"
	// FormatGKE is a Cloud Audit Logs LogEntry of a GKE cluster (protoPayload.@type
	// type.googleapis.com/google.cloud.audit.AuditLog, serviceName k8s.io).
	FormatGKE Format = "gke"
)

// formats lists the formats Decode knows.
var formats = []Format{FormatAuto, FormatJSON, FormatEKS, FormatAKS, FormatGKE}

// Valid reports whether f is a known format ("" means auto).
func (f Format) Valid() bool {
	switch f {
	case "", FormatAuto, FormatJSON, FormatEKS, FormatAKS, FormatGKE:
		return true
	}
	return false
}

// ErrNotAuditEvent is returned for a record that holds no audit event (another category of an
// AKS diagnostic setting, another log of a CloudWatch group): the caller skips it.
var ErrNotAuditEvent = errors.New("cloudlog: the record holds no audit event")

// Record is what a record held: its events and the cluster it names ("" when it names none).
type Record struct {
	Events  []*auditv1.Event
	Cluster string
}

// Decode reads one record. The events alias data (see auditv1.DecodeEvent): the caller must not
// modify data while they are in use.
//
// GKE: the conversion fills auditID (operation.id, else insertId), stage (ResponseComplete, or
// ResponseStarted for an entry that is not the last of its operation), verb and objectRef (from
// methodName and resourceName), user (authenticationInfo.principalEmail), sourceIPs and
// userAgent (requestMetadata), requestObject and responseObject (request and response, without
// their @type), responseStatus (status: google.rpc codes mapped to HTTP codes, 201 for a
// successful create) and both timestamps (timestamp: the entry has no duration). It cannot fill
// the user's groups and UID, impersonation, the resourceVersion, the annotations, or the level
// (taken from what the entry carries), and Cloud Audit Logs truncate large bodies: such an
// event's diff is then unavailable and says so.
func Decode(format Format, data []byte) (Record, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return Record{}, fmt.Errorf("cloudlog: a record is a JSON object, got %.40q", data)
	}
	if format == "" || format == FormatAuto {
		var err error
		if format, err = detect(data); err != nil {
			return Record{}, err
		}
	}
	switch format {
	case FormatJSON:
		ev, err := auditv1.DecodeEvent(data)
		if err != nil {
			return Record{}, err
		}
		return Record{Events: []*auditv1.Event{ev}}, nil
	case FormatEKS:
		return decodeEKS(data)
	case FormatAKS:
		return decodeAKS(data)
	case FormatGKE:
		return decodeGKE(data)
	}
	return Record{}, fmt.Errorf("cloudlog: unknown format %q (one of %v)", format, formats)
}

// probe is what detect reads of a record.
type probe struct {
	Kind         string          `json:"kind"`
	APIVersion   string          `json:"apiVersion"`
	AuditID      string          `json:"auditID"`
	LogEvents    json.RawMessage `json:"logEvents"`
	Records      json.RawMessage `json:"records"`
	Category     string          `json:"category"`
	Properties   json.RawMessage `json:"properties"`
	ProtoPayload json.RawMessage `json:"protoPayload"`
}

func detect(data []byte) (Format, error) {
	var p probe
	if err := json.Unmarshal(data, &p); err != nil {
		return "", fmt.Errorf("cloudlog: %w", err)
	}
	switch {
	case p.AuditID != "" || p.APIVersion == "audit.k8s.io/v1":
		return FormatJSON, nil
	case p.LogEvents != nil:
		return FormatEKS, nil
	case p.Records != nil || p.Category != "" || p.Properties != nil:
		return FormatAKS, nil
	case p.ProtoPayload != nil:
		return FormatGKE, nil
	}
	return "", fmt.Errorf("cloudlog: unknown record (not an audit event, a CloudWatch envelope, an AKS diagnostic record or a GKE LogEntry): %.80s", data)
}

// decodeEKS reads an audit event, or a CloudWatch Logs subscription envelope of them.
func decodeEKS(data []byte) (Record, error) {
	var env struct {
		MessageType string `json:"messageType"`
		LogGroup    string `json:"logGroup"`
		LogStream   string `json:"logStream"`
		LogEvents   []struct {
			Message string `json:"message"`
		} `json:"logEvents"`
	}
	if err := json.Unmarshal(data, &env); err != nil {
		return Record{}, fmt.Errorf("cloudlog eks: %w", err)
	}
	if env.LogEvents == nil {
		ev, err := auditv1.DecodeEvent(data)
		if err != nil {
			return Record{}, err
		}
		return Record{Events: []*auditv1.Event{ev}}, nil
	}
	if env.MessageType == "CONTROL_MESSAGE" {
		return Record{}, ErrNotAuditEvent
	}
	var rec Record
	// The group is /aws/eks/<cluster>/cluster; its streams kube-apiserver-audit-* hold the
	// audit log, the others (authenticator, scheduler, ...) are skipped.
	rec.Cluster = EKSCluster(env.LogGroup)
	if env.LogStream != "" && !EKSAuditStream(env.LogStream) {
		return Record{}, ErrNotAuditEvent
	}
	for i, le := range env.LogEvents {
		ev, err := auditv1.DecodeEvent([]byte(le.Message))
		if err != nil {
			return Record{}, fmt.Errorf("cloudlog eks: logEvents[%d]: %w", i, err)
		}
		rec.Events = append(rec.Events, ev)
	}
	return rec, nil
}

// aksRecord is one diagnostic record of an AKS cluster.
type aksRecord struct {
	Category   string `json:"category"`
	ResourceID string `json:"resourceId"`
	Properties struct {
		Log string `json:"log"`
	} `json:"properties"`
}

// decodeAKS reads a diagnostic record, or the Event Hubs envelope {"records": [...]}.
func decodeAKS(data []byte) (Record, error) {
	var env struct {
		Records []aksRecord `json:"records"`
	}
	if err := json.Unmarshal(data, &env); err != nil {
		return Record{}, fmt.Errorf("cloudlog aks: %w", err)
	}
	if env.Records == nil {
		var r aksRecord
		if err := json.Unmarshal(data, &r); err != nil {
			return Record{}, fmt.Errorf("cloudlog aks: %w", err)
		}
		env.Records = []aksRecord{r}
	}
	var rec Record
	for i, r := range env.Records {
		if !strings.HasPrefix(strings.ToLower(r.Category), "kube-audit") {
			continue // kube-apiserver's own log, the controller manager's, ...
		}
		if rec.Cluster == "" {
			rec.Cluster = aksCluster(r.ResourceID)
		}
		ev, err := auditv1.DecodeEvent([]byte(r.Properties.Log))
		if err != nil {
			return Record{}, fmt.Errorf("cloudlog aks: records[%d].properties.log: %w", i, err)
		}
		rec.Events = append(rec.Events, ev)
	}
	if len(rec.Events) == 0 {
		return Record{}, ErrNotAuditEvent
	}
	return rec, nil
}

// aksCluster is the cluster name of a resource ID
// /subscriptions/…/resourceGroups/…/providers/Microsoft.ContainerService/managedClusters/<name>.
func aksCluster(id string) string {
	parts := strings.Split(id, "/")
	for i := 0; i+1 < len(parts); i++ {
		if strings.EqualFold(parts[i], "managedClusters") {
			return strings.ToLower(parts[i+1])
		}
	}
	return ""
}

// gkeEntry is the part of a GKE Cloud Audit Logs LogEntry the conversion reads.
type gkeEntry struct {
	InsertID  string    `json:"insertId"`
	Timestamp time.Time `json:"timestamp"`
	Resource  struct {
		Type   string            `json:"type"`
		Labels map[string]string `json:"labels"`
	} `json:"resource"`
	Operation *struct {
		ID    string `json:"id"`
		First bool   `json:"first"`
		Last  bool   `json:"last"`
	} `json:"operation"`
	ProtoPayload struct {
		Type               string `json:"@type"`
		ServiceName        string `json:"serviceName"`
		MethodName         string `json:"methodName"`
		ResourceName       string `json:"resourceName"`
		AuthenticationInfo struct {
			PrincipalEmail string `json:"principalEmail"`
		} `json:"authenticationInfo"`
		RequestMetadata struct {
			CallerIP                string `json:"callerIp"`
			CallerSuppliedUserAgent string `json:"callerSuppliedUserAgent"`
		} `json:"requestMetadata"`
		Status *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"status"`
		Request  map[string]json.RawMessage `json:"request"`
		Response map[string]json.RawMessage `json:"response"`
	} `json:"protoPayload"`
}

// decodeGKE converts a Cloud Audit Logs entry of a GKE cluster into an audit.k8s.io/v1 Event.
func decodeGKE(data []byte) (Record, error) {
	var e gkeEntry
	if err := json.Unmarshal(data, &e); err != nil {
		return Record{}, fmt.Errorf("cloudlog gke: %w", err)
	}
	p := &e.ProtoPayload
	if p.ServiceName != "" && p.ServiceName != "k8s.io" {
		return Record{}, ErrNotAuditEvent // a Cloud API's audit log (container.googleapis.com, ...)
	}
	if p.MethodName == "" {
		return Record{}, errors.New("cloudlog gke: protoPayload.methodName is missing")
	}
	if e.Timestamp.IsZero() {
		return Record{}, errors.New("cloudlog gke: timestamp is missing")
	}
	ref, verb, err := gkeObject(p.MethodName, p.ResourceName)
	if err != nil {
		return Record{}, err
	}
	ev := auditv1.Event{
		Kind: "Event", APIVersion: "audit.k8s.io/v1", Level: "Metadata",
		AuditID: e.InsertID, Stage: "ResponseComplete", Verb: verb,
		User:      auditv1.UserInfo{Username: p.AuthenticationInfo.PrincipalEmail},
		UserAgent: p.RequestMetadata.CallerSuppliedUserAgent, ObjectRef: ref,
		RequestReceivedTimestamp: e.Timestamp, StageTimestamp: e.Timestamp,
	}
	if e.Operation != nil && e.Operation.ID != "" {
		ev.AuditID = e.Operation.ID
		if !e.Operation.Last {
			ev.Stage = "ResponseStarted"
		}
	}
	if ev.AuditID == "" {
		return Record{}, errors.New("cloudlog gke: neither operation.id nor insertId names the request")
	}
	if ip := p.RequestMetadata.CallerIP; ip != "" {
		ev.SourceIPs = []string{ip}
	}
	if p.Request != nil {
		ev.RequestObject = withoutType(p.Request)
		ev.Level = "Request"
	}
	if p.Response != nil {
		ev.ResponseObject = withoutType(p.Response)
		ev.Level = "RequestResponse"
	}
	ev.ResponseStatus = gkeStatus(p.Status, verb)
	b, err := json.Marshal(&ev)
	if err != nil {
		return Record{}, fmt.Errorf("cloudlog gke: %w", err)
	}
	out, err := auditv1.DecodeEvent(b)
	if err != nil {
		return Record{}, fmt.Errorf("cloudlog gke: %w", err)
	}
	return Record{Events: []*auditv1.Event{out}, Cluster: e.Resource.Labels["cluster_name"]}, nil
}

// withoutType is a protoPayload body without the @type Cloud Audit Logs adds.
func withoutType(m map[string]json.RawMessage) json.RawMessage {
	delete(m, "@type")
	b, err := json.Marshal(m)
	if err != nil {
		return nil
	}
	return b
}

// gkeObject reads the object and verb of methodName (io.k8s.<group>.<version>.<resource>[.<subresource>].<verb>)
// and resourceName (<group>/<version>/[namespaces/<ns>/]<resource>[/<name>[/<subresource>]]).
func gkeObject(method, resource string) (*auditv1.ObjectReference, string, error) {
	parts := strings.Split(method, ".")
	if len(parts) < 6 || parts[0] != "io" || parts[1] != "k8s" {
		return nil, "", fmt.Errorf("cloudlog gke: methodName %q is not io.k8s.<group>.<version>.<resource>.<verb>", method)
	}
	verb := parts[len(parts)-1]
	ref := &auditv1.ObjectReference{}
	segs := strings.Split(strings.Trim(resource, "/"), "/")
	if len(segs) < 3 {
		return nil, "", fmt.Errorf("cloudlog gke: resourceName %q is not <group>/<version>/<resource>", resource)
	}
	ref.APIGroup, ref.APIVersion = segs[0], segs[1]
	if ref.APIGroup == "core" {
		ref.APIGroup = ""
	}
	rest := segs[2:]
	if len(rest) >= 2 && rest[0] == "namespaces" && len(rest) != 2 {
		ref.Namespace, rest = rest[1], rest[2:]
	}
	switch len(rest) {
	case 1:
		ref.Resource = rest[0]
	case 2:
		ref.Resource, ref.Name = rest[0], rest[1]
	case 3:
		ref.Resource, ref.Name, ref.Subresource = rest[0], rest[1], rest[2]
	default:
		return nil, "", fmt.Errorf("cloudlog gke: resourceName %q: want [namespaces/<ns>/]<resource>[/<name>[/<subresource>]]", resource)
	}
	// The method names the subresource too when the resource name does not (create binding).
	if ref.Subresource == "" && len(parts) == 7 && parts[4] == ref.Resource {
		ref.Subresource = parts[5]
	}
	return ref, verb, nil
}

// grpcToHTTP maps google.rpc codes to the HTTP codes kube-apiserver answers.
var grpcToHTTP = map[int]int32{
	1: 499, 2: 500, 3: 422, 4: 504, 5: 404, 6: 409, 7: 403, 8: 429, 9: 400, 10: 409, 11: 400,
	12: 405, 13: 500, 14: 503, 15: 500, 16: 401,
}

func gkeStatus(st *struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}, verb string,
) *auditv1.Status {
	if st == nil || st.Code == 0 {
		code := int32(200)
		if verb == "create" {
			code = 201
		}
		return &auditv1.Status{Code: code}
	}
	code, ok := grpcToHTTP[st.Code]
	if !ok {
		code = 500
	}
	return &auditv1.Status{Status: "Failure", Code: code, Message: st.Message, Reason: "rpc code " + strconv.Itoa(st.Code)}
}

// EKSCluster returns the cluster named by an EKS control-plane log group,
// /aws/eks/<cluster>/cluster, or "" for another group.
func EKSCluster(logGroup string) string {
	rest, ok := strings.CutPrefix(logGroup, "/aws/eks/")
	if !ok {
		return ""
	}
	cluster, _, _ := strings.Cut(rest, "/")
	return cluster
}

// EKSAuditStream reports whether a stream of an EKS control-plane log group holds the audit log
// (kube-apiserver-audit-*); the group's other streams (authenticator, scheduler, ...) do not.
func EKSAuditStream(logStream string) bool {
	return strings.HasPrefix(logStream, "kube-apiserver-audit")
}

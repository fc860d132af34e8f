// Package cloudlog reads audit events from the records of the clouds' audit log streams, for
// managed clusters whose API servers take no audit webhook: a plain audit.k8s.io/v1 Event (JSON
// lines, EKS's CloudWatch Logs messages), a CloudWatch Logs subscription envelope (logEvents[]
// whose messages are events), an AKS diagnostic record (properties.log holds the event; Event
// Hubs wraps records in records[]), and a GKE Cloud Audit Logs entry (a LogEntry whose
// protoPayload is a google.cloud.audit.AuditLog), converted to audit.k8s.io/v1.
//
// GKE's entries carry less than an audit event: see Decode for what the conversion fills in and
// what it cannot.
package cloudlog

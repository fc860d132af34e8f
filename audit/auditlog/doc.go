// Package auditlog reads JSON-lines audit logs (kube-apiserver's --audit-log-path, or a dump):
// ReplayFile and Replayer read files once, Follower follows one like tail -F, across rotation
// and truncation. Events with unusable timestamps are dropped and counted.
package auditlog

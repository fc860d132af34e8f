// Package healthz holds the JSON body of GET /healthz, which the root bundle writes and the
// end-to-end tests of the binaries read.
package healthz

import "github.com/kelemetry/kelemetry/audit/auditlog"

// Body is the body of GET /healthz.
type Body struct {
	// Status is "ok", or "unavailable" (HTTP 503) while a sink cannot take writes.
	Status string `json:"status"`
	// Reason says why the status is not ok, e.g. the store's disk is full.
	Reason     string `json:"reason,omitempty"`
	QueueDepth int    `json:"queueDepth"`
	// LinkJobs counts the link jobs queued or running. QueueDepth and LinkJobs both 0 (read in
	// that order, with no new audit batches) means everything accepted is in the sinks.
	LinkJobs int `json:"linkJobs"`
	// Queue is the state of the audit queue: of its connection to NATS ("nats: connected") or of
	// the durable queue's log ("durable: ok"), or why it is unavailable, which also makes Status
	// "unavailable" (NATS out of reach, a failed write of the log); empty for the in-memory queue.
	Queue  string `json:"queue,omitempty"`
	Replay Replay `json:"replay"`
	// Version and Commit name the running build (see --version).
	Version string `json:"version"`
	Commit  string `json:"commit"`
}

// Replay reports the start-up replay.
type Replay struct {
	Done  bool                   `json:"done"`
	Files []auditlog.ReplayStats `json:"files"`
	Error string                 `json:"error,omitempty"`
}

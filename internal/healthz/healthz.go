// Package healthz holds the JSON body of GET /healthz, which the root bundle writes and the
// end-to-end tests of the binaries read.
package healthz

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

// Replay reports the start-up replay of audit logs (--replay): done once every file (and every
// Event file, --replay-events) is read and flushed.
type Replay struct {
	Done  bool         `json:"done"`
	Files []ReplayFile `json:"files"`
	Error string       `json:"error,omitempty"`
}

// ReplayFile is where the replay of one audit log file stands.
type ReplayFile struct {
	File string `json:"file"`
	// Done is true once the file is read and what it held is in the sinks (or it failed).
	Done bool `json:"done"`
	// BytesRead of BytesTotal: the file's bytes (compressed ones for a .gz file).
	BytesRead  int64 `json:"bytesRead"`
	BytesTotal int64 `json:"bytesTotal"`
	// Lines read, Events queued, BadLines skipped, DroppedEvents dropped for their timestamps.
	Lines         int64 `json:"lines"`
	Events        int64 `json:"events"`
	BadLines      int64 `json:"badLines"`
	DroppedEvents int64 `json:"droppedEvents"`
	// EventsPerSecond is Events over the time the file took so far.
	EventsPerSecond float64 `json:"eventsPerSecond"`
}

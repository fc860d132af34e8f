// Package queue holds audit events between the receivers (webhook, log replay and follow) and the
// consumer, keeping each object's events in order while objects run in parallel. New picks one
// of three implementations from Config: in memory, bounded by events and bytes; durable, which
// writes each batch to a segmented log on local disk and fsyncs it before the webhook's 200,
// replays what was not handled after a crash, refuses with ErrUnavailable while the log cannot
// be written (and probes until it can) and takes an exclusive lock on its folder; or on NATS
// JetStream (package natsqueue), shared by several ingest replicas. In the durable and NATS
// queues a batch counts as handled only once the sinks were synced after it (Deps.Sync).
package queue

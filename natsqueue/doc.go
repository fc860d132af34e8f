// Package natsqueue carries audit events from producers (the webhook, log replay) to consumers
// over NATS JetStream.
//
// A Producer publishes each message on <prefix>.<cluster>.<partition>, where the partition is a
// hash of the object key, and returns only after JetStream acknowledged every message of the
// batch; its errors are classified as ErrFull (the stream is at its limits: answer 429) or
// ErrUnavailable (NATS or a JetStream quorum is unreachable: answer 503).
//
// A Consumer processes every partition in order with one active member per partition across
// all replicas: each partition has a durable pull consumer with a pinned-client priority group
// (NATS 2.11+), so the server delivers a partition to one member at a time and pins another one
// when the active member stops pulling. A message is acknowledged only after the Handler
// returned nil; a message that keeps failing is moved to a dead-letter stream so that it never
// blocks its partition.
package natsqueue

// Package natslog carries audit events from producers (the webhook, log replay) to consumers
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
// when the active member stops pulling. A member handles the messages of a partition it pulled
// and has at hand as a batch: each in order through the Handler, then one Committer call (e.g.
// syncing the sinks), then the acknowledgements; a message is acknowledged only after the
// Handler returned nil and a commit that followed succeeded. A message that keeps failing is
// moved to a dead-letter stream so that it never blocks its partition.
//
// Members decide which partitions they pull from a membership kept in the key-value bucket
// <Stream>_MEMBERS (elastic by default, or static with Config.Members): adding a replica
// spreads the partitions, a member that leaves or dies has its partitions taken over, and a
// member that returns gets its share back. A member that starts processing a partition it did
// not hold first replays the partition's recent history (the stream <Stream>_HISTORY, which
// sources the stream and keeps messages after their acknowledgement) to a Warmer, so that state built from previous
// messages, such as the last version of each object for the audit-stream diff, is continuous
// across takeovers. Consumer.Backlog tells how many messages the stream still holds for a
// member's partitions (all of them until its membership settled after the start), for health
// checks: 0 means the member has caught up.
//
// A message that comes back after it was handled is recognised where the consumer can tell:
// after a batch's commit and before its acknowledgements, the consumer writes the batch's stream
// sequences into the key-value bucket <Stream>_COMMITTED (a commit marker a takeover reads); it
// remembers the sequences and message IDs it handled lately, so a redelivery or a second copy of
// a retried publish is acknowledged without being handled again; and a storedCheck
// (WithStoredCheck) asks the sinks whether a redelivered message's spans are already stored.
// Handling a message again otherwise rewrites the same span IDs.
package natslog

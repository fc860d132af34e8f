// Package natsqueue holds the settings of the NATS JetStream audit queue (Config: where NATS is,
// how the stream is partitioned, how consumption retries) and of a NATS connection alone (Conn:
// URLs, credentials, TLS, reconnects; Config has the same keys and Config.Conn returns them).
// Dial opens a connection with a Conn: remote linkers and other programs that talk to the same
// NATS connect that way. The queue itself (producer, partitioned consumer, warm-ups, dead
// letters) is audit/queue's, used when queue.Config.NATS has URLs.
package natsqueue

// Package tap holds the webhook's batch taps: Dumper writes every accepted event to a rotating
// JSON-lines file that log replay reads back, Forwarder posts the accepted batches to other
// audit webhooks. Each has its own bounded buffer and never holds up the webhook.
package tap

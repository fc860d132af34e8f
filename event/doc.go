// Package event turns Kubernetes Events (core/v1 and events.k8s.io/v1) into aggregator events on
// the trace of the object they are about (involvedObject / regarding): the reason as title, the
// message (note) as a log, the reporting controller, type, action and count as attributes, a
// Warning marked as an error, and the span covering the occurrences seen.
//
// Span identity: one span per Event per trace window (ID "<uid>/<window start>"). A repeated
// Event (count or series bump) re-sends the same span with a longer range and the new count, so
// it updates rather than floods; sinks upsert by span ID. Replaying Events is harmless.
//
// Sources: ReplayFile (recorded EventLists, for the all-in-one's --replay-events) and Source, a
// list+watch loop over the API with a bounded queue and a checkpoint (last resourceVersion plus a
// bounded set of Event UIDs and counts already sent) so a restart neither loses nor duplicates.
package event

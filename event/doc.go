// Package event turns Kubernetes Events (core/v1 and events.k8s.io/v1) into aggregator events on
// the trace of the object they are about (involvedObject / regarding): the reason as title, the
// message (note) as a log, the reporting controller, type, action and count as attributes, a
// Warning marked as an error, and the span covering the occurrences seen.
//
// Span identity: one span per Event per trace window (ID "<uid>/<window start>"). A repeated
// Event (count or series bump) re-sends the same span with a longer range and the new count, so
// it updates rather than floods; the stores keep one version per span ID. Replaying Events is
// harmless.
//
// The related object becomes a link of the span, written at once. Converter turns a Record (an
// Event of either API, fromCore, fromEventsV1, Decode) into an aggregator event; it refuses an
// Event that names a namespaced object without its namespace (errNoObject). The sources drop and
// count Events with a timestamp the store cannot represent or more than Config.MaxFutureSkew
// ahead.
//
// Sources: ReplayFile and Replayer (recorded EventLists, for the all-in-one's --replay-events) and
// Source, a list+watch loop over the API with a bounded queue and a checkpoint (last
// resourceVersion plus a bounded set of Event UIDs and counts already sent) so a restart neither
// loses nor duplicates; the checkpoint lives in a file (fileCheckpoint) or a ConfigMap
// (configMapCheckpoint). While the sinks are unavailable (a full disk, a full OTLP queue) both wait
// with backoff instead of dropping Events. Module (newModule) runs the replay and one watch per
// configured cluster (Config.WatchClusters), each with its own checkpoint.
package event

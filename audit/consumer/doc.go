// Package consumer turns audit events into aggregator events. It keeps the configured verbs and
// stages, drops repeated deliveries, puts a request on a subresource onto its parent object's
// trace, and attaches field diffs and snapshots from the audit-stream diff (objdiff.Stream). For
// writes audited without a response body it joins the informer diff source's records
// (Deps.InformerDiffs) without blocking: an event waits a bounded time, then goes out with
// "diff unavailable". A deletecollection lands on every object it deleted or marked for
// deletion; the namespace controller's deletes link objects to their namespace. Warm rebuilds the
// diff state from replayed history when a replica takes a NATS partition over; Prefilter keeps
// out of a queue what the consumer would drop anyway.
package consumer

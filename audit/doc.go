// Package audit turns Kubernetes audit events (audit.k8s.io/v1) into aggregator events: the
// audit pipeline from kube-apiserver to the aggregator.
//
// Sources. Webhook is the handler of kube-apiserver's audit webhook backend (POST
// /audit/{cluster}): it decodes each EventList with the package's own decoder (DecodeEventList),
// drops items with unusable timestamps (naming them in its answer), answers a batch or event it
// queued lately without queueing it again, and answers 200 only once the batch is queued; 429 or
// 503 with Retry-After when kube-apiserver should retry (queue full, bodies in flight, a sink or
// the queue unavailable, shutting down), 400 and 413 when it should not. ReplayFile and Replayer
// read a JSON-lines audit log once; Follower follows one like tail -F, across rotation.
//
// Queues (Queue) sit between the sources and the consumer and keep each object's events in
// order while objects run in parallel: Queue in memory, bounded by events and bytes;
// durable queue, which writes each batch to a segmented log on local disk and fsyncs it before
// the 200, replays what was not handled after a crash, refuses with ErrUnavailable while the
// log cannot be written (and probes until it can), and takes an exclusive lock on its folder;
// NATS queue, on NATS JetStream (package natsqueue), shared by several ingest replicas. In these
// two a batch counts as handled only once the sinks were synced after it. Prefilter leaves out of a
// queue what the consumer would drop anyway; Observe shows every accepted batch to Observers
// (kelemetrix is one).
//
// Consumer converts each event: it keeps the configured verbs and stages, drops repeated
// deliveries, puts a request on a subresource onto its parent object's trace, and attaches field
// diffs and snapshots from the audit-stream diff (diff.Stream). For writes audited without a
// response body it joins the informer diff source's records (InformerDiffs) without blocking:
// an event waits a bounded time, then goes out with "diff unavailable". A deletecollection lands
// on every object it deleted or marked for deletion (from its response, or the informers'
// deletions, InformerDeletions); the namespace controller's deletes link objects to their
// namespace. Consumer.Warm rebuilds the diff state from replayed history when a replica takes a
// NATS partition over.
//
// Taps (BatchTap) see each accepted batch after it is queued: Dumper writes the events to a
// rotating JSON-lines file that ReplayFile reads back, Forwarder posts the batches to another
// audit webhook; neither holds up the webhook.
//
// New (Module) builds the pipeline for fx from Config and registers its Start and Stop. Package
// audittest replays recorded audit logs through a Consumer and an aggregator for tests.
package audit

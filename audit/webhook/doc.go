// Package webhook is the handler of kube-apiserver's audit webhook backend (POST /audit and
// /audit/{cluster}). It decodes each EventList (package auditv1), drops items with unusable
// timestamps (naming them in its answer), answers a batch or event it queued lately without
// queueing it again, and answers 200 only once the batch is queued; 429 or 503 with Retry-After
// when kube-apiserver should retry (queue full, bodies in flight over budget, a sink or the
// queue unavailable, shutting down), 400 and 413 when it should not. Taps (BatchTap) see each
// accepted batch after it is queued.
package webhook

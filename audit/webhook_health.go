package audit

import (
	"context"
	"net/http"
)

// webhookUnavailableRetryAfter is the Retry-After value, in seconds, of a 503 answer while the
// sinks are unhealthy (a full disk takes a while to clear).
const webhookUnavailableRetryAfter = "5"

// rejectUnavailable is the reason of batches refused while the sinks are unhealthy.
const rejectUnavailable = "unavailable"

// SetHealth makes the webhook refuse batches (503 with Retry-After and the reason, without
// reading the body) while health returns an error, e.g. (*aggregator.Engine).SinkHealth while
// the store's disk is full: kube-apiserver then keeps the batches and retries. Call it before
// serving. Module wires it to the aggregator when the aggregator has SinkHealth.
func (w *Webhook) SetHealth(health func(ctx context.Context) error) {
	w.health = health
}

// unavailable answers 503 and reports true when the sinks are unhealthy.
func (w *Webhook) unavailable(ctx context.Context, rw http.ResponseWriter, cluster string) bool {
	if w.health == nil {
		return false
	}
	err := w.health(ctx)
	if err == nil {
		return false
	}
	rw.Header().Set("Retry-After", webhookUnavailableRetryAfter)
	w.reject(ctx, rw, http.StatusServiceUnavailable, rejectUnavailable, cluster, "cannot store audit events now: "+err.Error())
	return true
}

package webhook

import (
	"context"
	"net/http"

	"github.com/kelemetry/kelemetry/aggregator"
)

// webhookUnavailableRetryAfter is the Retry-After value, in seconds, of a 503 answer while the
// sinks are unhealthy (a full disk takes a while to clear).
const webhookUnavailableRetryAfter = "5"

// Reasons of batches refused while the sinks are unhealthy.
const (
	rejectUnavailable = "unavailable"
	rejectSinkBusy    = "sink_busy"
)

// unavailable answers 503 (or 429 when the sinks are only busy) and reports true when the sinks
// are unhealthy.
func (w *Webhook) unavailable(ctx context.Context, rw http.ResponseWriter, cluster string) bool {
	if w.health == nil {
		return false
	}
	err := w.health(ctx)
	if err == nil {
		return false
	}
	if aggregator.OnlyBusy(err) {
		rw.Header().Set("Retry-After", webhookRetryAfter)
		w.reject(ctx, rw, http.StatusTooManyRequests, rejectSinkBusy, cluster, "sinks busy, retry later: "+err.Error())
		return true
	}
	rw.Header().Set("Retry-After", webhookUnavailableRetryAfter)
	w.reject(ctx, rw, http.StatusServiceUnavailable, rejectUnavailable, cluster, "cannot store audit events now: "+err.Error())
	return true
}

// Package bodybuf pools the webhook's request body buffers by size class, so that a retry storm
// of large batches reuses buffers instead of allocating one per request.
package bodybuf

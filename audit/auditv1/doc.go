// Package auditv1 is the audit.k8s.io/v1 wire format as the audit pipeline reads it: the Event
// type and its parts, the decoder of an EventList or one event (DecodeEventList, DecodeEvent,
// DecodeEventListSkipping) that scans each body in place and notes the metadata of a response
// object while it reads it, the pooled body buffers a webhook reads requests into, the timestamp
// checks every receiver applies (CheckEventTime, FilterEventTimes), the readers of object bodies
// the consumer needs (DecodeBodyMeta, responseMeta, ListItems, PropagationPolicy) beside the
// scanner they share, and the object key events are partitioned and ordered by (PartitionKey,
// PartitionIndex), the same in every queue.
package auditv1

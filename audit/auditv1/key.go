package auditv1

// FNV-1a, 64 bit, written out to hash strings without converting them to byte slices.
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

func fnvAdd(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime64
	}
	// A zero byte ends every field, so ("ab", "c") and ("a", "bc") differ.
	h *= fnvPrime64
	return h
}

// partitionIndex hashes the event's object key: cluster, group, resource, namespace and name, as
// the consumer will name the object. The API version and subresource are left out, so that
// requests on a subresource stay in order with those on the object. A create with generateName has
// no name in its objectRef: the name (and, for a cluster-scoped object, the namespace) comes from
// the response body, as the consumer takes it, so the create is handled before the object's later
// events and not in parallel with them (otherwise the first diffs and link times of every
// generated Pod or ReplicaSet depended on which partition ran first). Events without an objectRef
// hash by audit ID.
func PartitionIndex(cluster string, ev *Event, n int) int {
	h := fnvAdd(fnvOffset64, cluster)
	if group, resource, ns, name, ok := partitionObject(ev); ok {
		h = fnvAdd(h, group)
		h = fnvAdd(h, resource)
		h = fnvAdd(h, ns)
		h = fnvAdd(h, name)
	} else {
		h = fnvAdd(h, "\x00auditID")
		h = fnvAdd(h, ev.AuditID)
	}
	return int(h % uint64(n))
}

// partitionObject names the object an event is partitioned by (see partitionIndex); ok is false
// for an event without an objectRef, which is partitioned by its audit ID.
func partitionObject(ev *Event) (group, resource, namespace, name string, ok bool) {
	if ev.ObjectRef == nil {
		return "", "", "", "", false
	}
	r := Ref(ev)
	namespace, name = r.Namespace, r.Name
	if name == "" && len(ev.ResponseObject) > 0 && !IsCollectionDelete(ev) {
		if meta, ok := ResponseIsObject(r, ev); ok {
			name = meta.Name
			if namespace == "" {
				namespace = meta.Namespace
			}
		}
	}
	return r.APIGroup, r.Resource, namespace, name, true
}

// eventOverhead is what one queued event costs besides its request and response bodies: the
// decoded struct, its strings and maps (a typical Metadata-level event decodes to about 1 KB).
const eventOverhead = 1 << 10

// respNoteOverhead is what the decoder's note of a response body's metadata adds (respMeta and
// its strings).
const respNoteOverhead = 384

// EventBytes estimates the memory one queued event holds: its raw request and response bodies
// plus a fixed overhead for the rest (more with the decoder's note of the response body).
func EventBytes(ev *Event) int64 {
	n := int64(len(ev.RequestObject)+len(ev.ResponseObject)) + eventOverhead
	if ev.resp != nil && ev.resp.body != nil {
		n += respNoteOverhead + int64(ev.resp.layout.Bytes())
	}
	return n
}

// isCollectionDelete reports whether ev is a deletecollection that names no object.
func IsCollectionDelete(ev *Event) bool {
	return ev != nil && ev.Verb == "deletecollection" && ev.ObjectRef != nil && ev.ObjectRef.Name == ""
}

// natsKey is the object key a message is partitioned by: the object as Queue partitions it, or
// the audit ID of an event without an objectRef.
func PartitionKey(ev *Event) string {
	group, resource, ns, name, ok := partitionObject(ev)
	if !ok {
		return "\x00auditID/" + ev.AuditID
	}
	return group + "/" + resource + "/" + ns + "/" + name
}

package kube

// notObjectKinds are kinds of bodies that are never the object a request or an event names:
// what subresources and operations answer or take instead of the object (a Status of a delete or
// failure, a Scale, an Eviction, a Binding, a TokenRequest, DeleteOptions), lists, watch events,
// and the server-side tables and partial metadata a client may ask for.
var notObjectKinds = map[string]bool{
	"Status":                    true,
	"Scale":                     true,
	"Eviction":                  true,
	"Binding":                   true,
	"TokenRequest":              true,
	"DeleteOptions":             true,
	"List":                      true,
	"WatchEvent":                true,
	"Table":                     true,
	"PartialObjectMetadata":     true,
	"PartialObjectMetadataList": true,
}

// IsObjectKind reports whether a body of this kind can be the object itself, as opposed to one
// of the kinds above. An empty kind (a body that does not say) can be the object: callers that
// need a kind check for it themselves. Callers also compare the body's name and UID with the
// object's.
func IsObjectKind(kind string) bool {
	return !notObjectKinds[kind]
}

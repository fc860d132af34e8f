package objdiff_test

import (
	"fmt"

	"github.com/kelemetry/kelemetry/diff"
	"github.com/kelemetry/kelemetry/internal/objdiff"
)

func ExampleCompare() {
	old := []byte(`{"metadata":{"resourceVersion":"1","labels":{"app":"web"}},
		"spec":{"replicas":2,"template":{"spec":{"containers":[{"name":"app","image":"alpine:3.16"}]}}}}`)
	new := []byte(`{"metadata":{"resourceVersion":"2","labels":{"app":"web","app.kubernetes.io/name":"web"}},
		"spec":{"replicas":4,"template":{"spec":{"containers":[{"name":"sidecar","image":"envoy"},{"name":"app","image":"alpine:3.17"}]}}}}`)
	changes, err := objdiff.Compare(old, new, diff.Options{})
	if err != nil {
		panic(err)
	}
	for _, c := range changes {
		fmt.Println(c)
	}
	// Output:
	// metadata.labels["app.kubernetes.io/name"] <none> -> web
	// spec.replicas 2 -> 4
	// spec.template.spec.containers[name=sidecar] <none> -> {"name":"sidecar","image":"envoy"}
	// spec.template.spec.containers[name=app].image alpine:3.16 -> alpine:3.17
}

package linker_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/kube"
	"github.com/kelemetry/kelemetry/linker"
	"github.com/kelemetry/kelemetry/telemetry"
)

// The owner linker reads the controlling ownerReference from the body that came with the event.
// Without an ObjectGetter it never calls an API server.
func ExampleOwnerLinker() {
	l := linker.NewOwnerLinker(kube.NewStaticMapper(), nil, telemetry.Settings{})
	pod := aggregator.Object{
		ObjectRef: aggregator.ObjectRef{Cluster: "prod", Version: "v1", Resource: "pods", Namespace: "default", Name: "web-7d9f-abcde"},
		Body: json.RawMessage(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web-7d9f-abcde","namespace":"default",
			"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-7d9f","uid":"1234","controller":true}]}}`),
	}
	links, err := l.Lookup(context.Background(), pod)
	if err != nil {
		panic(err)
	}
	for _, link := range links {
		fmt.Println(link.Role, link.Class, link.Target)
	}
	// Output: parent children prod/apps/replicasets/default/web-7d9f
}

// A parent-link annotation can point at an object in another cluster.
func ExampleAnnotationLinker() {
	l := linker.NewAnnotationLinker(nil, telemetry.Settings{})
	cm := aggregator.Object{
		ObjectRef: aggregator.ObjectRef{Cluster: "edge", Version: "v1", Resource: "configmaps", Namespace: "default", Name: "settings"},
		Body: json.RawMessage(`{"kind":"ConfigMap","metadata":{"name":"settings","annotations":{
			"kelemetry.io/parent-link":"{\"cluster\":\"hub\",\"group\":\"apps\",\"version\":\"v1\",\"resource\":\"deployments\",\"namespace\":\"default\",\"name\":\"web\"}"}}}`),
	}
	links, _ := l.Lookup(context.Background(), cm)
	fmt.Println(links[0].Role, links[0].Target)
	// Output: parent hub/apps/deployments/default/web
}

package linkrule_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/linkrule"
)

// A rule making the Secrets a Pod mounts its parents, compiled once and applied to a Pod.
func ExampleCompile() {
	rules, err := linkrule.ParseRules(strings.NewReader(`
apiVersion: kelemetry.io/v1alpha1
kind: LinkRule
metadata: {name: pod-secrets}
spec:
  source: {resources: [{group: "", resource: pods}]}
  role: parent
  class: volumes
  targets:
    - resource: secrets
      version: v1
      name: object.spec.volumes.filter(v, has(v.secret)).map(v, v.secret.secretName)
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	rule, err := linkrule.Compile(rules[0], "example", linkrule.CompileOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	pod := aggregator.Object{
		ObjectRef: aggregator.ObjectRef{Cluster: "prod", Version: "v1", Resource: "pods", Namespace: "shop", Name: "web-0"},
		Body:      []byte(`{"kind":"Pod","metadata":{"name":"web-0"},"spec":{"volumes":[{"name":"tls","secret":{"secretName":"web-tls"}},{"name":"tmp","emptyDir":{}}]}}`),
	}
	links, err := rule.Evaluate(context.Background(), pod, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, l := range links {
		fmt.Println(l.Role, l.Class, l.Target)
	}
	// Output: parent volumes prod//secrets/shop/web-tls
}

package audit_test

import (
	"fmt"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/audit/consumer"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
)

// An audit webhook request's body is an audit.k8s.io/v1 EventList. The consumer turns each of its
// events into an aggregator event: the object it is about, a title, the timing and attributes.
func ExampleDecodeEventList() {
	body := []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{
		"level":"Metadata","auditID":"7b3c0f52-0d4e-4a55-9d2c-1f3b6e0c9a01","stage":"ResponseComplete",
		"requestURI":"/api/v1/namespaces/shop/configmaps/web-config","verb":"update",
		"user":{"username":"alice"},"sourceIPs":["10.0.0.7"],"userAgent":"kubectl/v1.34.0",
		"objectRef":{"resource":"configmaps","namespace":"shop","name":"web-config","apiVersion":"v1"},
		"responseStatus":{"code":200},
		"requestReceivedTimestamp":"2026-11-29T17:00:00.000000Z",
		"stageTimestamp":"2026-11-29T17:00:00.012000Z"}]}`)
	events, err := auditv1.DecodeEventList(body)
	if err != nil {
		fmt.Println(err)
		return
	}
	consumer, err := consumer.New(consumer.Config{}, consumer.Deps{Aggregator: &aggregatortest.RecordingAggregator{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, ev := range events {
		out, keep, err := consumer.Convert("prod", ev)
		if err != nil || !keep {
			fmt.Println("skipped:", err)
			continue
		}
		user, _ := out.Attributes.Get(aggregator.AttrUser)
		code, _ := out.Attributes.Get(aggregator.AttrStatusCode)
		fmt.Println(out.Object.Key())
		fmt.Println(out.Title)
		fmt.Println(out.End.Sub(out.Start), user, code)
	}
	// Output:
	// prod//configmaps/shop/web-config
	// alice update
	// 12ms alice 200
}

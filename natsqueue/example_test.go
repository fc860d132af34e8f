package natsqueue_test

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/kelemetry/kelemetry/natsqueue"
)

// A webhook publishes each accepted batch and maps the queue's errors to HTTP statuses; a
// consumer replica handles messages and acknowledges them when the handler returns nil.
func Example() {
	cfg := natsqueue.Config{URLs: []string{"nats://127.0.0.1:4222"}, Replicas: 1}
	if err := cfg.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	status := func(err error) int {
		switch {
		case err == nil:
			return http.StatusOK
		case errors.Is(err, natsqueue.ErrFull):
			return http.StatusTooManyRequests
		default:
			return http.StatusServiceUnavailable
		}
	}
	fmt.Println(status(nil), status(natsqueue.ErrFull), status(natsqueue.ErrUnavailable))

	// With a server running:
	//	p, err := natsqueue.NewProducer(ctx, cfg, telemetry.Settings{})
	//	err = p.Publish(ctx, []natsqueue.Message{{Cluster: "prod", Key: "apps/deployments/ns/web", ID: auditID, Payload: body}})
	//	c, err := natsqueue.NewConsumer(ctx, cfg, handle, telemetry.Settings{})
	//	err = c.Start(ctx); defer c.Stop(ctx)
	fmt.Println(natsqueue.Partition("apps/deployments/ns/web", 16) < 16, cfg.WithDefaults().Subject("prod", 3))
	// Output:
	// 200 429 503
	// true kelemetry.audit.prod.3
}

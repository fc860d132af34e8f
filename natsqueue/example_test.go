package natsqueue_test

import (
	"fmt"
	"time"

	"github.com/kelemetry/kelemetry/natsqueue"
)

// The audit queue's settings carry the connection's: a program that is not the queue (a remote
// linker worker, a tool) connects to the same NATS with Config.Conn and Dial.
func ExampleConfig_Conn() {
	cfg := natsqueue.Config{URLs: []string{"nats://nats-0:4222", "nats://nats-1:4222"}, Partitions: 32}
	if err := cfg.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	conn := cfg.WithDefaults().Conn()
	fmt.Println(conn.URLs, conn.Name, conn.ReconnectWait < 5*time.Second)

	// With a server running:
	//	nc, err := natsqueue.Dial(conn, slog.Default())
	//	defer nc.Drain()
	// Output:
	// [nats://nats-0:4222 nats://nats-1:4222] kelemetry true
}

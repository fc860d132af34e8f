package natstest

import "go.uber.org/goleak"

// IgnoreLeaks are the goleak options of a package whose tests run embedded nats-servers: the
// goroutines the server itself leaves behind when it is stopped at an awkward moment. Everything
// else is still checked.
//   - A server stopped while it sets up the history stream's source consumer leaves its wait for
//     that consumer's answer (a 30 s timer, not tied to the server's shutdown) running.
//   - A cluster node stopped while it creates a replica's file store (a catch-up after a leader
//     change) does not stop that store: its flush loop and its access-time registration outlive
//     the server (seen once in 40 runs of natsqueue's TestClusterR3NodeLoss).
func IgnoreLeaks() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*stream).trySetupSourceConsumer.func3"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*fileStore).flushStreamStateLoop"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server/ats.Register.func1"),
	}
}

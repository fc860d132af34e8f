package kelemetry_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them. As in natsqueue, one
// goroutine of the embedded nats-server (the tests with the NATS queue) is let go: a server stopped
// while it sets up the history stream's source consumer leaves its wait for that consumer's
// answer (a 30 s timer, not tied to the server's shutdown) running.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*stream).trySetupSourceConsumer.func3"))
}

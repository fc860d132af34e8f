package natsqueue

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them. One goroutine of the
// embedded nats-server is let go: when a test stops a server while it sets up the history
// stream's source consumer, the server's wait for that consumer's answer (a 30 s timer, not tied
// to the server's shutdown) outlives the server.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*stream).trySetupSourceConsumer.func3"))
}

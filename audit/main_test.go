package audit

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them.
func TestMain(m *testing.M) {
	// A goroutine of the embedded nats-server may outlive a test with the NATS queue: a server
	// stopped while it sets up the history stream's source consumer leaves its 30 s wait for that
	// consumer's answer running (see natsqueue's TestMain).
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*stream).trySetupSourceConsumer.func3"))
}

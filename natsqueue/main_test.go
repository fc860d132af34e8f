package natsqueue

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them. The embedded server's
// mirror setup (the history stream) waits up to 30s for its consumer's creation without
// watching the server's shutdown; that goroutine is the server's, not this package's.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server.(*stream).setupMirrorConsumer.func3"))
}

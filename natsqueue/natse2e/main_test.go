//go:build e2e

package natse2e

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them. The embedded server's
// mirror setup waits up to 30s for its consumer without watching the server's shutdown: that
// goroutine is the server's.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server.(*stream).setupMirrorConsumer.func3"))
}

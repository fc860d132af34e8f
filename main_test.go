package kelemetry_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/kelemetry/kelemetry/internal/natstest"
)

// TestMain fails the package's tests when a goroutine outlives them, except the embedded
// nats-server's own (natstest.IgnoreLeaks; the tests with the NATS queue).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, natstest.IgnoreLeaks()...)
}

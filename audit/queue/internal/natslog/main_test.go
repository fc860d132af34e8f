package natslog

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/kelemetry/kelemetry/internal/natstest"
)

// TestMain fails the package's tests when a goroutine outlives them, except the embedded
// nats-server's own (natstest.IgnoreLeaks).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, natstest.IgnoreLeaks()...)
}

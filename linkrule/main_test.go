package linkrule

import (
	"log/slog"
	"testing"

	"go.uber.org/goleak"

	"github.com/kelemetry/kelemetry/telemetry"
)

// TestMain fails the package's tests when a goroutine outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// silent keeps the tests' warnings (failed evaluations, rejected rules) out of the output: an
// unset logger is slog.Default().
var silent = telemetry.Settings{Logger: slog.New(slog.DiscardHandler)}

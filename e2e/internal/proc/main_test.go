package proc

import (
	"testing"

	"github.com/kelemetry/kelemetry/e2e/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

package store

import (
	"testing"

	"github.com/kelemetry/kelemetry/store/internal/storetest"
)

// The span builders of the shared suites.
var (
	t0         = storetest.T0
	ref        = storetest.Ref
	objectSpan = storetest.ObjectSpan
	eventSpan  = storetest.EventSpan
	userEvent  = storetest.UserEvent
	export     = storetest.Export
	keys       = storetest.Keys
)

const win = storetest.Win

func TestPebble(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store { return openTestPebble(t, PebbleConfig{}, nil) }, storetest.Limits{})
}

func TestPebbleSearch(t *testing.T) {
	storetest.RunSearch(t, func(t *testing.T) storetest.Store { return openTestPebble(t, PebbleConfig{}, nil) }, storetest.Limits{})
}

package aggregator

import (
	"fmt"
	"time"
)

// Window is the length of one trace's time window; windows are aligned to the Unix epoch. It is
// one value for the whole application: the aggregator places spans by it, the stores match
// query ranges against it, the query engine and the Event source compute trace IDs with it.
// Modules take it from the fx graph (kelemetry.Module provides it from Config.Window; a binary of
// your own may fx.Supply one); the zero value means DefaultWindow everywhere.
type Window time.Duration

// DefaultWindow is the window length when none is configured.
const DefaultWindow = 30 * time.Minute

// Length returns the window length (DefaultWindow for the zero value).
func (w Window) Length() time.Duration {
	if w <= 0 {
		return DefaultWindow
	}
	return time.Duration(w)
}

// Start returns the start of the window that holds t.
func (w Window) Start(t time.Time) time.Time { return WindowStart(t, w.Length()) }

// Validate reports a window length that cannot work.
func (w Window) Validate() error {
	if w < 0 || (w > 0 && time.Duration(w) < time.Second) {
		return fmt.Errorf("window %s: must be at least 1s", time.Duration(w))
	}
	return nil
}

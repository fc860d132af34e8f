package kelemetry_test

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"github.com/kelemetry/kelemetry"
	"github.com/kelemetry/kelemetry/internal/logtest"
)

// The bundle's fx events go to the application's slog logger at debug level, not to fx's
// default printer: an application on kelemetry.Module prints no wiring lines at info level.
func TestModuleLogsFxEventsThroughSlog(t *testing.T) {
	rec := &logtest.Recorder{}
	cfg := kelemetry.Config{Cluster: "test", AuditAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0"}
	app := fx.New(kelemetry.Module, fx.Supply(cfg, slog.New(rec)), fx.NopLogger)
	require.NoError(t, app.Err())
	fxEvents := map[string]bool{"provided": true, "supplied": true, "invoking": true, "invoked": true, "decorated": true, "run": true, "invoke failed": true, "error encountered while applying options": true}
	var provided int
	for _, r := range rec.Records() {
		if r.Message == "provided" {
			provided++
		}
		if fxEvents[r.Message] {
			assert.Equal(t, slog.LevelDebug, r.Level, "%s: fx's events stay at debug level", r.Message)
		}
	}
	assert.Positive(t, provided, "the parts' provides are logged through the application's logger")
}

package kelemetrix

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/kelemetry/kelemetry/audit"
	"github.com/kelemetry/kelemetry/telemetry"
)

// TestModuleObservesOnlyWithMetrics: Module attaches the processor to the audit pipeline only when
// it has metrics to record. Without any, the pipeline's queue stays unwrapped, so the webhook can
// reuse a body once its events were handled (an observer may keep them).
func TestModuleObservesOnlyWithMetrics(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  Config
		want int
	}{
		"no metrics": {Config{}, 0},
		"a metric":   {Config{Metrics: []MetricConfig{{Name: "requests", Kind: kindCounter, Quantity: quantityRequestCount}}}, 1},
	} {
		t.Run(name, func(t *testing.T) {
			var got struct {
				fx.In
				Observers []audit.Observer `group:"kelemetry.audit.observers"`
			}
			app := fxtest.New(t, Module, fx.NopLogger, fx.Supply(tc.cfg, telemetry.Settings{}), fx.Populate(&got))
			app.RequireStart()
			defer app.RequireStop()
			n := 0
			for _, o := range got.Observers {
				if o != nil {
					n++
				}
			}
			require.Equal(t, tc.want, n)
			if tc.want > 0 {
				_, ok := got.Observers[0].(*Processor)
				assert.True(t, ok)
			}
		})
	}
}

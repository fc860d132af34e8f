package aggregatortest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
)

func TestRecordingDecorator(t *testing.T) {
	ctx := context.Background()
	pod := aggregator.ObjectRef{Cluster: "c1", Version: "v1", Resource: "pods", Namespace: "default", Name: "web-1"}
	at := time.Date(2026, 11, 29, 17, 5, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		dec      *aggregatortest.RecordingDecorator
		wantName string
		wantSpan string // the event span's name, as exported
	}{
		{"records only", &aggregatortest.RecordingDecorator{}, "recording", "update"},
		{"applies Fn", &aggregatortest.RecordingDecorator{DecoratorName: "upper", Fn: func(_ context.Context, sp *aggregator.Span) {
			if sp.Kind == aggregator.KindEvent {
				sp.Name = "UPDATE"
			}
		}}, "upper", "UPDATE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.wantName, tc.dec.Name())
			sink := &aggregatortest.RecordingSink{}
			e, err := aggregator.New(aggregator.Config{}, aggregator.Deps{Sinks: []aggregator.Sink{sink}, Decorators: []aggregator.Decorator{tc.dec}})
			require.NoError(t, err)
			require.NoError(t, e.Send(ctx, &aggregator.Event{
				Object: aggregator.Object{ObjectRef: pod}, Source: "audit", ID: "1", Title: "update", Start: at, End: at,
			}))
			require.NoError(t, e.Stop(ctx))

			seen := tc.dec.Spans()
			require.Len(t, seen, 2, "the object span and the event span")
			assert.Equal(t, aggregator.KindObject, seen[0].Kind)
			assert.Equal(t, aggregator.KindEvent, seen[1].Kind)
			assert.Equal(t, tc.wantSpan, seen[1].Name)
			exported := sink.Spans()
			require.Len(t, exported, 2)
			assert.Equal(t, tc.wantSpan, exported[1].Name, "the sink gets the decorated span")
		})
	}
}

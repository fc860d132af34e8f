package event

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/internal/logtest"
	"github.com/kelemetry/kelemetry/internal/telemetrytest"
	"github.com/kelemetry/kelemetry/internal/timecheck"
	"github.com/kelemetry/kelemetry/telemetry"
)

func timedCore(uid string, edit func(e *corev1.Event)) *corev1.Event {
	now := time.Now().Add(-time.Minute)
	e := &corev1.Event{
		TypeMeta:       metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta:     metav1.ObjectMeta{Name: "web." + uid, Namespace: "default", UID: types.UID(uid), ResourceVersion: "1"},
		InvolvedObject: corev1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "web"},
		Reason:         "ScalingReplicaSet", Message: "Scaled", Type: corev1.EventTypeNormal,
		FirstTimestamp: metav1.NewTime(now), LastTimestamp: metav1.NewTime(now), Count: 1,
	}
	if edit != nil {
		edit(e)
	}
	return e
}

func TestConvertChecksTimes(t *testing.T) {
	y1600 := time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC)
	future := time.Now().Add(720 * time.Hour)
	ctx := context.Background()
	tests := []struct {
		name  string
		rec   *record
		want  error
		field string
	}{
		{name: "good", rec: fromCore(timedCore("a", nil))},
		{name: "eventTime 1600", want: timecheck.ErrTimeUnrepresentable, field: "eventTime: 1600-01-01T00:00:00Z is outside the representable range (years 1678 to 2261)",
			rec: fromCore(timedCore("a", func(e *corev1.Event) { e.EventTime = metav1.NewMicroTime(y1600) }))},
		{name: "firstTimestamp 1600", want: timecheck.ErrTimeUnrepresentable, field: "firstTimestamp: 1600-01-01T00:00:00Z is outside",
			rec: fromCore(timedCore("a", func(e *corev1.Event) {
				e.FirstTimestamp = metav1.NewTime(time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC))
			}))},
		{name: "lastTimestamp future", want: timecheck.ErrTimeInFuture, field: "lastTimestamp: ",
			rec: fromCore(timedCore("a", func(e *corev1.Event) { e.LastTimestamp = metav1.NewTime(future) }))},
		{name: "series future", want: timecheck.ErrTimeInFuture, field: "series.lastObservedTime: ",
			rec: fromCore(timedCore("a", func(e *corev1.Event) {
				e.Series = &corev1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(future)}
			}))},
		{name: "events.k8s.io eventTime 1600", want: timecheck.ErrTimeUnrepresentable, field: "eventTime: 1600-01-01",
			rec: fromEventsV1(&eventsv1.Event{
				ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "default", UID: "u"},
				Regarding:  corev1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "web"},
				EventTime:  metav1.NewMicroTime(y1600),
			})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewConverter("c", nil, 0).Convert(ctx, tt.rec, time.Time{})
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.want)
			var te *timecheck.TimeError
			require.True(t, errors.As(err, &te))
			assert.Contains(t, err.Error(), tt.field)
			if errors.Is(tt.want, timecheck.ErrTimeInFuture) {
				assert.Contains(t, err.Error(), "(event.maxFutureSkew 24h)")
				// A wider skew lets it through.
				_, err = NewConverter("c", nil, 0).withMaxFutureSkew(-1).Convert(ctx, tt.rec, time.Time{})
				require.NoError(t, err)
			}
		})
	}
}

func TestReplayDropsBadTimes(t *testing.T) {
	var lines []string
	for _, e := range []*corev1.Event{
		timedCore("good", nil),
		timedCore("y1600", func(e *corev1.Event) { e.EventTime = metav1.NewMicroTime(time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC)) }),
		timedCore("future", func(e *corev1.Event) { e.LastTimestamp = metav1.NewTime(time.Now().Add(720 * time.Hour)) }),
	} {
		b, err := json.Marshal(e)
		require.NoError(t, err)
		lines = append(lines, string(b))
	}
	path := filepath.Join(t.TempDir(), "events.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	agg := &aggregatortest.RecordingAggregator{}
	var logs logtest.Buffer
	reader := sdkmetric.NewManualReader()
	ts := telemetry.Settings{Logger: slogText(&logs), MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}
	st, err := ReplayFile(context.Background(), path, NewConverter("c", nil, 0), agg, ts)
	require.NoError(t, err)
	assert.Equal(t, ReplayStats{File: path, Events: 3, Sent: 1, Dropped: 2}, st)
	require.Len(t, agg.Events(), 1)
	assert.Contains(t, logs.String(), "eventTime: 1600-01-01T00:00:00Z is outside the representable range (years 1678 to 2261)")
	assert.Contains(t, logs.String(), "ahead of this receiver's clock (event.maxFutureSkew 24h)")
	assert.Equal(t, map[string]int64{timecheck.TimeReasonUnrepresentable: 1, timecheck.TimeReasonFuture: 1},
		sums(t, reader, "kelemetry.event.dropped_events"))
}

func TestSourceDropsBadTimes(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	agg := &aggregatortest.RecordingAggregator{}
	ts := telemetry.Settings{Logger: quiet.Logger, MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}
	s, err := newSource(sourceConfig{}, newFakeClient("1"), NewConverter("c", nil, 0), agg, nil, ts)
	require.NoError(t, err)
	bad := fromCore(timedCore("y1600", func(e *corev1.Event) { e.EventTime = metav1.NewMicroTime(time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC)) }))
	assert.True(t, s.handle(context.Background(), bad), "a bad Event is dropped, not retried")
	assert.True(t, s.handle(context.Background(), fromCore(timedCore("good", nil))))
	require.Len(t, agg.Events(), 1)
	// The other reasons and results are exported at 0 from the start.
	assert.Equal(t, map[string]int64{timecheck.TimeReasonUnrepresentable: 1, timecheck.TimeReasonFuture: 0},
		sums(t, reader, "kelemetry.event.dropped_events"))
	assert.Equal(t, map[string]int64{resultSent: 1, timecheck.TimeReasonUnrepresentable: 1,
		resultDuplicate: 0, resultSkipped: 0, resultFailed: 0, timecheck.TimeReasonFuture: 0}, sums(t, reader, "kelemetry.event.source.events"))
}

// The source's counters are exported at 0 from the start, each result and reason included.
func TestSourceCountersStartAtZero(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	ts := telemetry.Settings{Logger: quiet.Logger, MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}
	_, err := newSource(sourceConfig{}, newFakeClient("1"), NewConverter("c", nil, 0), &aggregatortest.RecordingAggregator{}, nil, ts)
	require.NoError(t, err)
	assert.Equal(t, telemetrytest.Zeros("result", "sent", "duplicate", "skipped", "send_error", "unrepresentable_time", "future_time"),
		telemetrytest.Points(t, reader, "kelemetry.event.source.events"))
	assert.Equal(t, telemetrytest.Zeros(""), telemetrytest.Points(t, reader, "kelemetry.event.source.send.retries"))
	assert.Equal(t, telemetrytest.Zeros("reason", "unrepresentable_time", "future_time"),
		telemetrytest.Points(t, reader, "kelemetry.event.dropped_events"))
}

// sums returns the sums of an int64 counter by its first attribute's value.
func sums(t *testing.T, reader *sdkmetric.ManualReader, name string) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok || m.Name != name {
				continue
			}
			for _, dp := range sum.DataPoints {
				key := ""
				if iter := dp.Attributes.Iter(); iter.Next() {
					key = iter.Attribute().Value.AsString()
				}
				out[key] += dp.Value
			}
		}
	}
	return out
}

func slogText(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

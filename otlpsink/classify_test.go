package otlpsink

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/kelemetry/kelemetry/telemetry"
)

// A batch the receiver refuses for good (the OTLP specification's non-retryable answers) is
// dropped and counted at once instead of holding the queue forever; a retryable answer is
// retried.
func TestRejectedBatchNotRetried(t *testing.T) {
	for _, tc := range []struct {
		err     error
		calls   int
		dropped int64
	}{
		{status.Error(codes.InvalidArgument, "bad span"), 1, 2},
		{status.Error(codes.Unauthenticated, "no token"), 1, 2},
		{errors.Join(errors.New("traces export"), status.Error(codes.PermissionDenied, "denied")), 1, 2},
		{status.Error(codes.Unavailable, "down"), 2, 0},
		{status.Error(codes.ResourceExhausted, "slow down"), 2, 0},
		{errors.New("dial tcp 127.0.0.1:4317: connect: connection refused"), 2, 0},
	} {
		ctx := context.Background()
		m, mp := newMetrics()
		rec := &recorder{fail: func(call int) error {
			if call == 1 {
				return tc.err
			}
			return nil
		}}
		s := newSink(t, Config{RetryBackoff: time.Millisecond}, rec, mp)
		require.NoError(t, s.Start(ctx))
		require.NoError(t, s.Export(ctx, manySpans(2)))
		require.NoError(t, s.Stop(ctx))
		_, calls, _ := rec.state()
		assert.Equal(t, tc.calls, calls, "%v", tc.err)
		assert.Equal(t, tc.dropped, m.value(t, "kelemetry.otlp.spans.dropped", reasonRejected), "%v", tc.err)
		assert.Equal(t, 2-tc.dropped, m.value(t, "kelemetry.otlp.spans.exported", ""), "%v", tc.err)
	}
}

// Against a real OTLP/HTTP receiver: 503 is retried, 400 is not, 413 splits the batch, and a
// partial success counts the rejected spans without sending the batch again.
func TestHTTPReceiverAnswers(t *testing.T) {
	for _, tc := range []struct {
		name              string
		answer            func(call int32, w http.ResponseWriter)
		requests          int32
		exported, dropped int64
	}{
		{"503 then OK is retried", func(call int32, w http.ResponseWriter) {
			if call == 1 {
				http.Error(w, "overloaded", http.StatusServiceUnavailable)
				return
			}
			writeOTLP(w, &coltracepb.ExportTraceServiceResponse{})
		}, 2, 3, 0},
		{"400 is dropped at once", func(_ int32, w http.ResponseWriter) {
			http.Error(w, "malformed", http.StatusBadRequest)
		}, 1, 0, 3},
		{"413 is split until it fits", func(call int32, w http.ResponseWriter) {
			if call == 1 {
				http.Error(w, "too large", http.StatusRequestEntityTooLarge)
				return
			}
			writeOTLP(w, &coltracepb.ExportTraceServiceResponse{})
		}, 3, 3, 0},
		{"partial success is not resent", func(_ int32, w http.ResponseWriter) {
			writeOTLP(w, &coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{
				RejectedSpans: 1, ErrorMessage: "span too old",
			}})
		}, 1, 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				tc.answer(calls.Add(1), w)
			}))
			defer srv.Close()
			m, mp := newMetrics()
			s, err := New(ctx, Config{Endpoint: srv.URL, RetryBackoff: time.Millisecond}, telemetry.Settings{Logger: quiet, MeterProvider: mp})
			require.NoError(t, err)
			require.NoError(t, s.Start(ctx))
			require.NoError(t, s.Export(ctx, testSpans()))
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			require.NoError(t, s.Stop(sctx))
			assert.Equal(t, tc.requests, calls.Load())
			assert.Equal(t, tc.exported, m.value(t, "kelemetry.otlp.spans.exported", ""))
			assert.Equal(t, tc.dropped, m.value(t, "kelemetry.otlp.spans.dropped", reasonRejected))
		})
	}
}

func writeOTLP(w http.ResponseWriter, resp *coltracepb.ExportTraceServiceResponse) {
	data, _ := proto.Marshal(resp)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(data)
}

package webhook

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/audit/auditv1"
)

type dropQueue struct{}

func (dropQueue) Enqueue(context.Context, string, []*auditv1.Event) error { return nil }

// TestWebhookPeakHeapMeasure is the scenario, measured: 30 parallel posts of 32 MiB
// batches to a real listener, sampling the heap in use. It runs only with
// KELEMETRY_MEASURE_INFLIGHT set to audit.webhook.maxInflightBytes (0: the default, 64 MiB):
//
//	KELEMETRY_MEASURE_INFLIGHT=0 go test ./audit -run PeakHeapMeasure -v
func TestWebhookPeakHeapMeasure(t *testing.T) {
	env, ok := os.LookupEnv("KELEMETRY_MEASURE_INFLIGHT")
	if !ok {
		t.Skip("a measurement: set KELEMETRY_MEASURE_INFLIGHT to run it")
	}
	limit, err := strconv.ParseInt(env, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := bigBatch(32<<20 - 4096)
	w := New(Config{MaxInflightBytes: limit}, Deps{Queue: dropQueue{}, Telemetry: quietSettings()})
	mux := http.NewServeMux()
	w.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client := srv.Client()
	defer client.CloseIdleConnections()
	runtime.GC()
	var peak atomic.Uint64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
		}
	}()
	var wg sync.WaitGroup
	var codes sync.Map
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Post(srv.URL+"/audit/c1", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			v, _ := codes.LoadOrStore(resp.StatusCode, new(atomic.Int64))
			v.(*atomic.Int64).Add(1) // only *atomic.Int64 stored
		}()
	}
	wg.Wait()
	close(stop)
	sampler.Wait()
	codes.Range(func(k, v any) bool { t.Logf("status %v: %d", k, v.(*atomic.Int64).Load()); return true })
	t.Logf("maxInflightBytes %d: peak heap in use %d MiB (client bodies share one 32 MiB slice)", w.cfg.MaxInflightBytes, peak.Load()>>20)
}

package remotelinker

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/telemetrytest"
	"github.com/kelemetry/kelemetry/natsqueue"
	"github.com/kelemetry/kelemetry/telemetry"
)

func natsqueueURL(url string) natsqueue.Conn { return natsqueue.Conn{URLs: []string{url}} }

// request sends raw bytes to a worker's subject and decodes the wireResult.
func request(t *testing.T, url, subject string, data []byte) wireResult {
	t.Helper()
	msg, err := connect(t, url).Request(subject, data, 5*time.Second)
	require.NoError(t, err)
	var res wireResult
	require.NoError(t, json.Unmarshal(msg.Data, &res), "%s", msg.Data)
	assert.Equal(t, wireVersion, res.Version)
	return res
}

func TestWorkerAnswersBadJobsWithErrors(t *testing.T) {
	url := natsServer(t)
	tel, reader := metrics()
	l := &funcLinker{name: "w", fn: func(_ context.Context, obj aggregator.Object) ([]aggregator.Link, error) {
		switch obj.Name {
		case "panic":
			panic("linker bug")
		case "fail":
			return nil, errors.New("cannot")
		}
		return nil, nil
	}}
	startWorker(t, connect(t, url), l, WorkerConfig{}, tel)
	for _, tc := range []struct {
		job  string
		code string
	}{
		{`garbage`, codeBadRequest},
		{``, codeBadRequest},
		{`{"v":1,"object":{"resource":"pods"}}`, codeBadRequest},
		{`{"v":1,"object":"x"}`, codeBadRequest},
		{`{"v":1,"object":{"resource":"pods","name":"a"},"body":{"broken"`, codeBadRequest},
		{`{"v":7,"object":{"resource":"pods","name":"a"}}`, codeUnsupportedVersion},
		{`{"v":1,"object":{"resource":"pods","name":"panic"}}`, codeLookup},
		{`{"v":1,"object":{"resource":"pods","name":"fail"}}`, codeLookup},
		{`{"v":1,"object":{"resource":"pods","name":"ok"}}`, ""},
	} {
		res := request(t, url, "kelemetry.link.w", []byte(tc.job))
		assert.Equal(t, tc.code, res.Code, "job %s: %+v", tc.job, res)
		assert.Equal(t, tc.code != "", res.Error != "", "job %s", tc.job)
	}
	assert.Equal(t, int64(1), telemetrytest.Int64(t, reader, "kelemetry.remotelinker.worker.jobs", "result", resultPanic))
	assert.Equal(t, int64(5), telemetrytest.Int64(t, reader, "kelemetry.remotelinker.worker.jobs", "result", codeBadRequest))
	// The worker survived the panic.
	assert.Empty(t, request(t, url, "kelemetry.link.w", []byte(`{"v":1,"object":{"resource":"pods","name":"ok"}}`)).Code)
}

func TestWorkerBusyAnswersAtOnce(t *testing.T) {
	url := natsServer(t)
	tel, reader := metrics()
	l := &funcLinker{name: "w", fn: stuck}
	startWorker(t, connect(t, url), l, WorkerConfig{Concurrency: 1, Timeout: 3 * time.Second}, tel)
	nc := connect(t, url)
	// The first job holds the only slot.
	first := make(chan error, 1)
	go func() {
		_, err := nc.Request("kelemetry.link.w", []byte(`{"v":1,"object":{"resource":"pods","name":"a"}}`), 5*time.Second)
		first <- err
	}()
	require.Eventually(t, func() bool { return l.calls.Load() == 1 }, 2*time.Second, time.Millisecond)
	start := time.Now()
	res := request(t, url, "kelemetry.link.w", []byte(`{"v":1,"object":{"resource":"pods","name":"b"}}`))
	assert.Equal(t, codeBusy, res.Code)
	assert.Less(t, time.Since(start), time.Second)
	assert.Equal(t, int64(1), telemetrytest.Int64(t, reader, "kelemetry.remotelinker.worker.jobs", "result", codeBusy))
	require.NoError(t, <-first, "the first job is answered when its timeout ends")
}

func TestWorkerStopDrains(t *testing.T) {
	url := natsServer(t)
	release := make(chan struct{})
	l := &funcLinker{name: "w", fn: func(context.Context, aggregator.Object) ([]aggregator.Link, error) {
		<-release
		return []aggregator.Link{{Target: cm, Role: aggregator.RoleChild}}, nil
	}}
	w, err := newWorker(connect(t, url), l, WorkerConfig{}, telemetry.Settings{})
	require.NoError(t, err)
	require.NoError(t, w.Start(context.Background()))
	c, err := NewClient(connect(t, url), LinkerConfig{Name: "w"}, telemetry.Settings{})
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		links, err := c.Lookup(context.Background(), aggregator.Object{ObjectRef: pod})
		if err == nil && len(links) != 1 {
			err = errors.New("no link")
		}
		got <- err
	}()
	require.Eventually(t, func() bool { return l.calls.Load() == 1 }, 2*time.Second, time.Millisecond)
	stopped := make(chan error, 1)
	go func() { stopped <- w.Stop(context.Background()) }()
	// Stop has drained the subscription and waits for the running job.
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.closed
	}, 5*time.Second, time.Millisecond)
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while a job was running", err)
	default:
	}
	close(release)
	require.NoError(t, <-stopped)
	require.NoError(t, <-got, "the running job was answered")
	_, err = c.Lookup(context.Background(), aggregator.Object{ObjectRef: pod})
	require.ErrorIs(t, err, errNoWorker, "a stopped worker takes no more jobs")
	require.NoError(t, w.Stop(context.Background()), "Stop twice")
}

func TestWorkerStopDeadlineCancelsLookups(t *testing.T) {
	url := natsServer(t)
	l := &funcLinker{name: "w", fn: stuck}
	w, err := newWorker(connect(t, url), l, WorkerConfig{Timeout: time.Minute}, telemetry.Settings{})
	require.NoError(t, err)
	require.NoError(t, w.Start(context.Background()))
	nc := connect(t, url)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = nc.Request("kelemetry.link.w", []byte(`{"v":1,"object":{"resource":"pods","name":"a"}}`), 10*time.Second)
	}()
	require.Eventually(t, func() bool { return l.calls.Load() == 1 }, 2*time.Second, time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, w.Stop(ctx), context.DeadlineExceeded)
	<-done
}

func TestServe(t *testing.T) {
	url := natsServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	l := &funcLinker{name: "s", fn: func(context.Context, aggregator.Object) ([]aggregator.Link, error) {
		return []aggregator.Link{{Target: cm, Role: aggregator.RoleChild}}, nil
	}}
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, connect(t, url), l, WorkerConfig{}, telemetry.Settings{}, time.Second) }()
	c, err := NewClient(connect(t, url), LinkerConfig{Name: "s"}, telemetry.Settings{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		links, err := c.Lookup(context.Background(), aggregator.Object{ObjectRef: pod})
		return err == nil && len(links) == 1
	}, 5*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-served)
}

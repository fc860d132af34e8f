package event

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/telemetry"
)

// quiet keeps the tests' warnings (failed lists, watches and sends) out of the output.
var quiet = telemetry.Settings{Logger: slog.New(slog.DiscardHandler)}

var t0 = time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC)

func coreEvent(t *testing.T, uid string, rv string, count int32, last time.Time) *unstructured.Unstructured {
	t.Helper()
	e := &corev1.Event{
		TypeMeta:       metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta:     metav1.ObjectMeta{Name: "web." + uid, Namespace: "default", UID: types.UID(uid), ResourceVersion: rv},
		InvolvedObject: corev1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "web"},
		Reason:         "ScalingReplicaSet", Message: "Scaled up " + uid, Type: corev1.EventTypeNormal,
		Source:         corev1.EventSource{Component: "deployment-controller"},
		FirstTimestamp: metav1.NewTime(t0), LastTimestamp: metav1.NewTime(last), Count: count,
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(e)
	require.NoError(t, err)
	return &unstructured.Unstructured{Object: obj}
}

// fakeClient serves a fixed list and hands each Watch a FakeWatcher the test drives.
type fakeClient struct {
	mu       sync.Mutex
	items    []unstructured.Unstructured
	listRV   string
	lists    int
	watchRVs []string
	expired  map[string]bool // watch resourceVersions answered 410 Gone
	watchers chan *watch.FakeWatcher
}

func newFakeClient(listRV string, items ...*unstructured.Unstructured) *fakeClient {
	c := &fakeClient{listRV: listRV, expired: map[string]bool{}, watchers: make(chan *watch.FakeWatcher, 10)}
	for _, it := range items {
		c.items = append(c.items, *it)
	}
	return c
}

func (c *fakeClient) List(_ context.Context, _ metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lists++
	l := &unstructured.UnstructuredList{Items: append([]unstructured.Unstructured(nil), c.items...)}
	l.SetResourceVersion(c.listRV)
	return l, nil
}

func (c *fakeClient) Watch(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	c.mu.Lock()
	c.watchRVs = append(c.watchRVs, opts.ResourceVersion)
	expired := c.expired[opts.ResourceVersion]
	c.mu.Unlock()
	if expired {
		return nil, apierrors.NewResourceExpired("too old resource version")
	}
	w := watch.NewFakeWithChanSize(10, false)
	c.watchers <- w
	return w, nil
}

func (c *fakeClient) nextWatcher(t *testing.T) *watch.FakeWatcher {
	t.Helper()
	select {
	case w := <-c.watchers:
		return w
	case <-time.After(5 * time.Second):
		t.Fatal("no watch started")
		return nil
	}
}

func (c *fakeClient) stats() (int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lists, append([]string(nil), c.watchRVs...)
}

// sentIDs returns "<event uid>:<count>" of each event sent, in order.
func sentIDs(agg *aggregatortest.RecordingAggregator) []string {
	var out []string
	for _, ev := range agg.Events() {
		uid, _ := ev.Attributes.Get(attrUID)
		count, _ := ev.Attributes.Get(AttrCount)
		out = append(out, uid+":"+count)
	}
	return out
}

func waitSent(t *testing.T, agg *aggregatortest.RecordingAggregator, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return len(agg.Events()) >= n }, 5*time.Second, 5*time.Millisecond,
		"want %d events, have %v", n, sentIDs(agg))
}

func TestSourceRestartLosesNoneDuplicatesNone(t *testing.T) {
	ctx := context.Background()
	store := fileCheckpoint{Path: filepath.Join(t.TempDir(), "events.json")}
	conv := NewConverter("c", nil, 0)
	agg := &aggregatortest.RecordingAggregator{}

	// First run: list two Events, then watch a new one and a repeat of the first.
	client := newFakeClient("10", coreEvent(t, "e1", "8", 1, t0), coreEvent(t, "e2", "9", 1, t0.Add(time.Second)))
	src, err := newSource(sourceConfig{CheckpointInterval: time.Hour}, client, conv, agg, store, quiet)
	require.NoError(t, err)
	require.NoError(t, src.Start(ctx))
	w := client.nextWatcher(t)
	waitSent(t, agg, 2)
	w.Add(coreEvent(t, "e3", "11", 1, t0.Add(2*time.Second)))
	w.Modify(coreEvent(t, "e1", "12", 2, t0.Add(3*time.Second)))
	waitSent(t, agg, 4)
	require.NoError(t, src.Stop(ctx))
	lists, rvs := client.stats()
	assert.Equal(t, 1, lists)
	assert.Equal(t, []string{"10"}, rvs)

	cp, err := store.Load(ctx)
	require.NoError(t, err)
	require.NotNil(t, cp)
	assert.Equal(t, "12", cp.ResourceVersion)
	assert.Len(t, cp.Seen, 3)

	// Second run: resumes the watch from the checkpoint without listing. The server sends the
	// repeat of e1 again (as after a reconnect), then a new Event.
	client2 := newFakeClient("99")
	src2, err := newSource(sourceConfig{CheckpointInterval: time.Hour}, client2, conv, agg, store, quiet)
	require.NoError(t, err)
	require.NoError(t, src2.Start(ctx))
	w2 := client2.nextWatcher(t)
	w2.Modify(coreEvent(t, "e1", "12", 2, t0.Add(3*time.Second)))
	w2.Add(coreEvent(t, "e4", "13", 1, t0.Add(4*time.Second)))
	waitSent(t, agg, 5)
	require.NoError(t, src2.Stop(ctx))
	lists, rvs = client2.stats()
	assert.Equal(t, 0, lists)
	assert.Equal(t, []string{"12"}, rvs)
	assert.Equal(t, []string{"e1:1", "e2:1", "e3:1", "e1:2", "e4:1"}, sentIDs(agg))

	// The repeat of e1 updated its span: same ID, longer range.
	evs := agg.Events()
	assert.Equal(t, evs[0].ID, evs[3].ID)
	assert.Equal(t, t0, evs[3].Start)
	assert.Equal(t, t0.Add(3*time.Second), evs[3].End)

	// Third run: the checkpoint is too old for a watch: list again; only what is new is sent.
	client3 := newFakeClient("20", coreEvent(t, "e1", "12", 2, t0.Add(3*time.Second)), coreEvent(t, "e2", "9", 1, t0.Add(time.Second)),
		coreEvent(t, "e3", "11", 1, t0.Add(2*time.Second)), coreEvent(t, "e4", "13", 1, t0.Add(4*time.Second)),
		coreEvent(t, "e5", "19", 1, t0.Add(5*time.Second)))
	client3.expired["13"] = true
	src3, err := newSource(sourceConfig{CheckpointInterval: time.Hour}, client3, conv, agg, store, quiet)
	require.NoError(t, err)
	require.NoError(t, src3.Start(ctx))
	client3.nextWatcher(t)
	waitSent(t, agg, 6)
	require.NoError(t, src3.Stop(ctx))
	lists, rvs = client3.stats()
	assert.Equal(t, 1, lists)
	assert.Equal(t, []string{"13", "20"}, rvs)
	assert.Equal(t, []string{"e1:1", "e2:1", "e3:1", "e1:2", "e4:1", "e5:1"}, sentIDs(agg))
	cp, err = store.Load(ctx)
	require.NoError(t, err)
	assert.Equal(t, "20", cp.ResourceVersion)
}

func TestSourceWatchErrorsAndBookmarks(t *testing.T) {
	ctx := context.Background()
	agg := &aggregatortest.RecordingAggregator{}
	client := newFakeClient("10")
	src, err := newSource(sourceConfig{}, client, NewConverter("c", nil, 0), agg, nil, quiet)
	require.NoError(t, err)
	require.NoError(t, src.Start(ctx))
	w := client.nextWatcher(t)
	bm := &unstructured.Unstructured{}
	bm.SetResourceVersion("15")
	w.Action(watch.Bookmark, bm)
	w.Add(coreEvent(t, "e1", "16", 1, t0))
	waitSent(t, agg, 1)
	// The server closes the watch: it resumes from the last position.
	w.Stop()
	client.nextWatcher(t).Error(&apierrors.NewResourceExpired("gone").ErrStatus)
	client.nextWatcher(t) // after a relist
	_, rvs := client.stats()
	assert.Equal(t, []string{"10", "16", "10"}, rvs)
	require.NoError(t, src.Stop(ctx))
	assert.Equal(t, "10", src.checkpoint().ResourceVersion)
	assert.Equal(t, []string{"e1:1"}, sentIDs(agg))
}

func TestSourceConfig(t *testing.T) {
	assert.NoError(t, sourceConfig{}.Validate())
	assert.Error(t, sourceConfig{API: "v2"}.Validate())
	assert.Error(t, sourceConfig{CheckpointConfigMap: "nope"}.Validate())
	assert.NoError(t, sourceConfig{CheckpointConfigMap: "kube-system/kelemetry-events"}.Validate())
	assert.Equal(t, schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}, sourceConfig{API: "events.k8s.io/v1"}.gvr())
	_, err := newSource(sourceConfig{}, nil, nil, nil, nil, quiet)
	assert.Error(t, err)
	// Stop without Start.
	src, err := newSource(sourceConfig{}, newFakeClient("1"), NewConverter("c", nil, 0), &aggregatortest.RecordingAggregator{}, nil, quiet)
	require.NoError(t, err)
	assert.NoError(t, src.Stop(context.Background()))
	_ = aggregator.DefaultWindow
}

// blockingStore records the checkpoints it saved, in order. The first Save blocks, ignoring its
// ctx (as fileCheckpoint does), until release is closed; it records its checkpoint only then.
type blockingStore struct {
	mu      sync.Mutex
	calls   int
	saved   []string // resourceVersions, in the order the Saves completed
	entered chan struct{}
	release chan struct{}
}

func (b *blockingStore) Load(context.Context) (*checkpoint, error) { return nil, nil }

func (b *blockingStore) Save(_ context.Context, cp *checkpoint) error {
	b.mu.Lock()
	b.calls++
	first := b.calls == 1
	b.mu.Unlock()
	if first {
		close(b.entered)
		<-b.release
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.saved = append(b.saved, cp.ResourceVersion)
	return nil
}

func (b *blockingStore) savedRVs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.saved...)
}

// A periodic checkpoint save that is still running when Stop is called must finish before Stop's
// final save, or its older checkpoint would overwrite the final one.
func TestSourceStopWaitsForPeriodicSave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := &blockingStore{entered: make(chan struct{}), release: make(chan struct{})}
		agg := &aggregatortest.RecordingAggregator{}
		client := newFakeClient("10", coreEvent(t, "e1", "8", 1, t0))
		// The bubble's clock starts in 2000, years before t0: no future-skew check.
		conv := NewConverter("c", nil, 0).withMaxFutureSkew(-1)
		src, err := newSource(sourceConfig{CheckpointInterval: time.Second}, client, conv, agg, store, quiet)
		require.NoError(t, err)
		require.NoError(t, src.Start(ctx))
		w := client.nextWatcher(t)
		synctest.Wait()
		require.Equal(t, []string{"e1:1"}, sentIDs(agg))

		// The periodic save of resourceVersion 10 starts and blocks.
		time.Sleep(time.Second) // fake time: lets the checkpoint ticker fire
		<-store.entered
		// A newer Event moves the checkpoint on.
		w.Add(coreEvent(t, "e2", "11", 1, t0.Add(time.Second)))
		synctest.Wait()
		require.Equal(t, []string{"e1:1", "e2:1"}, sentIDs(agg))

		stopped := make(chan error, 1)
		go func() { stopped <- src.Stop(ctx) }()
		synctest.Wait()
		var stopErr error
		select {
		case stopErr = <-stopped:
			t.Error("Stop returned while a periodic checkpoint save was still running")
		default:
			close(store.release)
			stopErr = <-stopped
		}
		require.NoError(t, stopErr)
		if !isClosed(store.release) {
			close(store.release)
		}
		synctest.Wait() // the released save, if Stop did not wait for it, completes now
		assert.Equal(t, []string{"10", "11"}, store.savedRVs(), "the final checkpoint must be saved last")
	})
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

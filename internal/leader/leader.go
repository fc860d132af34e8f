package leader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	leadercfg "github.com/kelemetry/kelemetry/diff/leader"
	"github.com/kelemetry/kelemetry/internal/loop"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Elector campaigns for a Lease until stopped; Leading reports whether it holds it. After
// losing the Lease it campaigns again. Start and Stop it once.
type Elector struct {
	cfg     leadercfg.Config
	lock    resourcelock.Interface
	logger  *slog.Logger
	leading atomic.Bool

	mu  sync.Mutex
	run *loop.Group // the campaign, set by a successful Start
}

// New returns an Elector for the Lease cfg names, read and written through dyn; ts gives its
// logger (may be unset).
func New(cfg leadercfg.Config, dyn dynamic.Interface, ts telemetry.Settings) (*Elector, error) {
	cfg.Enabled = true
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if dyn == nil {
		return nil, errors.New("diff informer leader election: nil dynamic client")
	}
	cfg = cfg.WithDefaults()
	return &Elector{
		cfg:    cfg,
		lock:   &dynamicLeaseLock{client: dyn.Resource(LeaseGVR).Namespace(cfg.LeaseNamespace), namespace: cfg.LeaseNamespace, name: cfg.LeaseName, identity: cfg.Identity},
		logger: ts.Log().With("component", "diff.leader", "lease", cfg.LeaseNamespace+"/"+cfg.LeaseName, "identity", cfg.Identity),
	}, nil
}

// Leading reports whether this replica holds the Lease now.
func (e *Elector) Leading() bool { return e.leading.Load() }

// Start campaigns in the background.
func (e *Elector) Start(_ context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.run != nil {
		return errors.New("diff informer leader election: already started")
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            e.lock,
		LeaseDuration:   e.cfg.LeaseDuration,
		RenewDeadline:   e.cfg.RenewDeadline,
		RetryPeriod:     e.cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            "kelemetry-diff-informer",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				e.leading.Store(true)
				e.logger.Info("leading: this replica records informer diffs")
			},
			OnStoppedLeading: func() { // also called when Run ends without having led
				if e.leading.Swap(false) {
					e.logger.Info("not leading: this replica stops recording informer diffs")
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("diff informer leader election: %w", err)
	}
	e.run = &loop.Group{}
	e.run.Start(func(runCtx context.Context) {
		for runCtx.Err() == nil {
			le.Run(runCtx) // returns when the Lease is lost or runCtx ends (releasing it when held)
		}
	})
	return nil
}

// Stop ends the campaign, releasing the Lease when held, and waits up to ctx.
func (e *Elector) Stop(ctx context.Context) error {
	e.mu.Lock()
	run := e.run
	e.mu.Unlock()
	if run == nil {
		return nil
	}
	return run.Stop(ctx, "diff informer leader election")
}

// LeaseGVR is the resource of the Lease the Elector holds.
var LeaseGVR = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}

// dynamicLeaseLock is resourcelock.LeaseLock over a dynamic client (the clients this module gets
// are dynamic ones).
type dynamicLeaseLock struct {
	client          dynamic.ResourceInterface
	namespace, name string
	identity        string
	lease           *coordinationv1.Lease
}

func (l *dynamicLeaseLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	u, err := l.client.Get(ctx, l.name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	lease := &coordinationv1.Lease{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, lease); err != nil {
		return nil, nil, fmt.Errorf("lease %s: %w", l.Describe(), err)
	}
	l.lease = lease
	rec := resourcelock.LeaseSpecToLeaderElectionRecord(&lease.Spec)
	raw, err := json.Marshal(*rec)
	if err != nil {
		return nil, nil, err
	}
	return rec, raw, nil
}

func (l *dynamicLeaseLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	lease := &coordinationv1.Lease{
		TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: l.namespace},
		Spec:       resourcelock.LeaderElectionRecordToLeaseSpec(&ler),
	}
	return l.write(ctx, lease, true)
}

func (l *dynamicLeaseLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if l.lease == nil {
		return errors.New("lease not initialized, call get or create first")
	}
	lease := l.lease.DeepCopy()
	lease.TypeMeta = metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"}
	lease.Spec = resourcelock.LeaderElectionRecordToLeaseSpec(&ler)
	return l.write(ctx, lease, false)
}

func (l *dynamicLeaseLock) write(ctx context.Context, lease *coordinationv1.Lease, create bool) error {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(lease)
	if err != nil {
		return err
	}
	var u *unstructured.Unstructured
	if create {
		u, err = l.client.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	} else {
		u, err = l.client.Update(ctx, &unstructured.Unstructured{Object: obj}, metav1.UpdateOptions{})
	}
	if err != nil {
		return err
	}
	out := &coordinationv1.Lease{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return err
	}
	l.lease = out
	return nil
}

func (l *dynamicLeaseLock) RecordEvent(string) {}

func (l *dynamicLeaseLock) Identity() string { return l.identity }

func (l *dynamicLeaseLock) Describe() string { return l.namespace + "/" + l.name }

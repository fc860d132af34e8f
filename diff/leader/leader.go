package leader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/kelemetry/kelemetry/internal/loop"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Defaults for Config.
const (
	DefaultLeaseName      = "kelemetry-diff-informer"
	defaultLeaseNamespace = "kube-system"
	defaultLeaseDuration  = 15 * time.Second
	defaultRenewDeadline  = 10 * time.Second
	defaultRetryPeriod    = 2 * time.Second
)

// Config configures the leader election of the informer diff source: with several
// replicas, every replica watches (so that a new leader has the last versions at hand), but only
// the holder of a coordination.k8s.io/v1 Lease records into the change cache. The zero value is
// off.
type Config struct {
	Enabled bool `yaml:"enabled"`
	// Cluster holds the Lease (default: the first watched cluster).
	Cluster string `yaml:"cluster"`
	// LeaseName and LeaseNamespace name the Lease (default kelemetry-diff-informer in
	// kube-system).
	LeaseName      string `yaml:"leaseName"`
	LeaseNamespace string `yaml:"leaseNamespace"`
	// Identity is this replica's name in the Lease (default: hostname_pid).
	Identity string `yaml:"identity"`
	// LeaseDuration, RenewDeadline and RetryPeriod as in client-go's leaderelection (default
	// 15s, 10s, 2s). LeaseDuration is stored in whole seconds, at least 1s.
	LeaseDuration time.Duration `yaml:"leaseDuration"`
	RenewDeadline time.Duration `yaml:"renewDeadline"`
	RetryPeriod   time.Duration `yaml:"retryPeriod"`
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.LeaseName == "" {
		c.LeaseName = DefaultLeaseName
	}
	if c.LeaseNamespace == "" {
		c.LeaseNamespace = defaultLeaseNamespace
	}
	if c.Identity == "" {
		host, _ := os.Hostname()
		c.Identity = host + "_" + strconv.Itoa(os.Getpid())
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = defaultLeaseDuration
	}
	if c.RenewDeadline == 0 {
		c.RenewDeadline = defaultRenewDeadline
	}
	if c.RetryPeriod == 0 {
		c.RetryPeriod = defaultRetryPeriod
	}
	return c
}

// Validate reports a configuration that cannot work (after WithDefaults).
func (c Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	c = c.withDefaults()
	if c.LeaseDuration < 0 || c.RenewDeadline < 0 || c.RetryPeriod < 0 {
		return errors.New("diff informer leader election: durations must not be negative")
	}
	if c.LeaseDuration < time.Second {
		// The Lease holds whole seconds (spec.leaseDurationSeconds): less reads as 0, an expired
		// Lease that every replica would take.
		return errors.New("diff informer leader election: leaseDuration must be at least 1s")
	}
	if c.LeaseDuration <= c.RenewDeadline {
		return errors.New("diff informer leader election: leaseDuration must be greater than renewDeadline")
	}
	if float64(c.RenewDeadline) <= leaderelection.JitterFactor*float64(c.RetryPeriod) {
		return fmt.Errorf("diff informer leader election: renewDeadline must be greater than %.1f × retryPeriod", leaderelection.JitterFactor)
	}
	return nil
}

// Elector campaigns for a Lease until stopped; Leading reports whether it holds it. After
// losing the Lease it campaigns again. Start and Stop it once.
type Elector struct {
	cfg     Config
	lock    resourcelock.Interface
	logger  *slog.Logger
	leading atomic.Bool

	mu  sync.Mutex
	run *loop.Group // the campaign, set by a successful Start
}

// New returns an Elector for the Lease cfg names, read and written through dyn; ts gives its
// logger (may be unset).
func New(cfg Config, dyn dynamic.Interface, ts telemetry.Settings) (*Elector, error) {
	cfg.Enabled = true
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if dyn == nil {
		return nil, errors.New("diff informer leader election: nil dynamic client")
	}
	cfg = cfg.withDefaults()
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

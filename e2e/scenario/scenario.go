// Package scenario holds the drivers of the end-to-end scenarios: the client-go steps that
// create, scale, patch and delete objects in a test cluster and wait for the control plane to act.
// The scenario tests (e2e/*_test.go) run them and assert on Kelemetry's traces; the recorder
// (./cmd/record) runs them by name and writes the audit log and Events they produced.
package scenario

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Defaults of Session.
const (
	DefaultTimeout      = 2 * time.Minute
	DefaultPollInterval = 250 * time.Millisecond
)

// Session is what a scenario runs with: a client acting as the admin and the namespace the
// scenario owns (created beforehand, see CreateNamespace).
type Session struct {
	Client    kubernetes.Interface
	Namespace string
	// Timeout bounds each wait for the control plane (default DefaultTimeout).
	Timeout time.Duration
	// PollInterval is the period of the waits (default DefaultPollInterval).
	PollInterval time.Duration
	// Step, when set, receives one line per step the scenario takes ("create deployment demo
	// image=alpine:3.16 replicas=2").
	Step func(line string)
	// Healthy, when set, is consulted when a wait times out: its error (a component that exited)
	// is added to the timeout error.
	Healthy func() error
}

// Scenario is a named driver.
type Scenario struct {
	Name        string
	Description string
	Run         func(ctx context.Context, s *Session) error
}

// registry lists the scenarios by name; the typed drivers (Rollout, CronJob, ...) return what the
// tests assert on, the registry drops it.
var registry = []Scenario{
	{
		Name:        "rollout",
		Description: "Deployment demo: create with 2 replicas, scale to 4, change the image, scale to 2, delete",
		Run:         func(ctx context.Context, s *Session) error { _, err := Rollout(ctx, s); return err },
	},
	{
		Name:        "ancestors",
		Description: "Deployment anc with 1 replica, rolled out",
		Run:         func(ctx context.Context, s *Session) error { _, err := Ancestors(ctx, s); return err },
	},
	{
		Name:        "cronjob",
		Description: "CronJob nightly and a Job created from it by hand, run to completion",
		Run:         func(ctx context.Context, s *Session) error { _, err := CronJob(ctx, s); return err },
	},
	{
		Name:        "annotations",
		Description: "Deployment web and a ConfigMap whose kelemetry.io/parent-link annotation names it, patched",
		Run:         func(ctx context.Context, s *Session) error { _, err := Annotations(ctx, s); return err },
	},
	{
		Name: "teardown",
		Description: "Deployment web, Service web, ConfigMaps settings and held (with a finalizer), then the namespace deleted; " +
			"held's finalizer removed 5s later",
		Run: func(ctx context.Context, s *Session) error { _, err := Teardown(ctx, s); return err },
	},
}

// Lookup returns the scenario of that name.
func Lookup(name string) (Scenario, bool) {
	i := slices.IndexFunc(registry, func(sc Scenario) bool { return sc.Name == name })
	if i < 0 {
		return Scenario{}, false
	}
	return registry[i], true
}

// All returns every registered scenario, in a stable order.
func All() []Scenario { return slices.Clone(registry) }

// Names returns the names of the registered scenarios.
func Names() []string {
	out := make([]string, 0, len(registry))
	for _, sc := range registry {
		out = append(out, sc.Name)
	}
	return out
}

// CreateNamespace creates a namespace and waits for its default ServiceAccount (pods cannot be
// created before).
func CreateNamespace(ctx context.Context, s *Session) error {
	s.step("create namespace %s", s.Namespace)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.Namespace}}
	if _, err := s.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", s.Namespace, err)
	}
	return s.wait(ctx, "default ServiceAccount of "+s.Namespace, func(ctx context.Context) error {
		_, err := s.Client.CoreV1().ServiceAccounts(s.Namespace).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}

func (s *Session) step(format string, args ...any) {
	if s.Step != nil {
		s.Step(fmt.Sprintf(format, args...))
	}
}

// wait calls check until it returns nil; after the session's timeout it returns the last error.
func (s *Session) wait(ctx context.Context, what string, check func(ctx context.Context) error) error {
	timeout, interval := s.Timeout, s.PollInterval
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var last error
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		if last == nil || ctx.Err() == nil {
			last = err // not the error of an attempt cut short by the deadline
		}
		select {
		case <-ctx.Done():
			err := fmt.Errorf("%s: not within %s: %w", what, timeout, last)
			if s.Healthy != nil {
				if herr := s.Healthy(); herr != nil {
					err = errors.Join(err, herr)
				}
			}
			return err
		case <-tick.C:
		}
	}
}

// waitGone waits until count returns 0.
func (s *Session) waitGone(ctx context.Context, what string, count func(ctx context.Context) (int, error)) error {
	return s.wait(ctx, what+" gone", func(ctx context.Context) error {
		n, err := count(ctx)
		if err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("%d left", n)
		}
		return nil
	})
}

// quote quotes a value for a step line when it holds spaces or quotes.
func quote(v string) string {
	if strings.ContainsAny(v, " \"'") {
		return fmt.Sprintf("%q", v)
	}
	return v
}

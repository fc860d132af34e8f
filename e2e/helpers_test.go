package e2e_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kelemetry/kelemetry/e2e/kapi"
	"github.com/kelemetry/kelemetry/e2e/scenario"
)

// Timeouts: the control plane acts within seconds; Kelemetry links in background workers.
const (
	clusterTimeout   = 2 * time.Minute
	kelemetryTimeout = time.Minute
	pollInterval     = 250 * time.Millisecond
)

// eventually calls check until it returns nil, failing the test with the last error after timeout
// (and with the shared environment's error when a component exited).
func eventually(t *testing.T, timeout time.Duration, what string, check func(ctx context.Context) error) {
	t.Helper()
	pollUntil(t, timeout, what, env.Healthy, check)
}

// pollUntil calls check until it returns nil, failing the test with the last error after
// timeout (and with health's error when a component exited).
func pollUntil(t *testing.T, timeout time.Duration, what string, health func() error, check func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var last error
	for {
		err := check(ctx)
		if err == nil {
			return
		}
		if last == nil || ctx.Err() == nil {
			last = err // not the error of an attempt cut short by the deadline
		}
		select {
		case <-ctx.Done():
			if herr := health(); herr != nil {
				t.Fatalf("%s: %v (and: %v)", what, last, herr)
			}
			t.Fatalf("%s: not within %s: %v", what, timeout, last)
		case <-tick.C:
		}
	}
}

// session is a scenario session in namespace ns of the shared test cluster, logging its steps.
func session(t *testing.T, ns string) *scenario.Session {
	t.Helper()
	return &scenario.Session{
		Client:       kube,
		Namespace:    ns,
		Timeout:      clusterTimeout,
		PollInterval: pollInterval,
		Step:         func(line string) { t.Log("step:", line) },
		Healthy:      env.Healthy,
	}
}

// newNamespace creates a namespace named prefix-<random>, waits for its default ServiceAccount
// (pods cannot be created before), and deletes it when the test ends.
func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	name := prefix + "-" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	})
	if err := scenario.CreateNamespace(t.Context(), session(t, name)); err != nil {
		t.Fatal(err)
	}
	return name
}

// traces returns every stored trace of one object, waiting until check accepts them (links are
// written by background workers, audit batches arrive every second).
func traces(t *testing.T, q kapi.Query, what string, check func(o kapi.ObjectTraces) error) kapi.ObjectTraces {
	t.Helper()
	if q.Cluster == "" {
		q.Cluster = clusterName
	}
	var out kapi.ObjectTraces
	eventually(t, kelemetryTimeout, what, func(ctx context.Context) error {
		o, err := api.ObjectTraces(ctx, q)
		if err != nil {
			return err
		}
		if err := checkObjectSpans(o); err != nil {
			return err
		}
		if check != nil {
			if err := check(o); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		out = o
		return nil
	})
	return out
}

// checkObjectSpans checks the trace model: one object span per window, the root of the trace.
func checkObjectSpans(o kapi.ObjectTraces) error {
	if len(o.Traces) == 0 {
		return fmt.Errorf("no stored trace")
	}
	for _, tr := range o.Traces {
		var roots int
		for _, s := range tr.Spans {
			if s.Kind() == kapi.KindObject {
				roots++
				if len(s.References) != 0 {
					return fmt.Errorf("trace %s: the object span has a parent", tr.TraceID)
				}
			}
		}
		if roots != 1 {
			return fmt.Errorf("trace %s: %d object spans, want 1", tr.TraceID, roots)
		}
	}
	return nil
}

// sameSet compares two name lists as sets.
func sameSet(got, want []string) error {
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	g, w = slices.Compact(g), slices.Compact(w)
	if !slices.Equal(g, w) {
		return fmt.Errorf("got %v, want %v", g, w)
	}
	return nil
}

// containsAll reports the names of want missing from got.
func containsAll(got, want []string) error {
	var missing []string
	for _, w := range want {
		if !slices.Contains(got, w) {
			missing = append(missing, w)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %v in %v", missing, got)
	}
	return nil
}

// wantEvents checks that the object's audit events include each user/verb/subresource triple.
func wantEvents(o kapi.ObjectTraces, triples ...[3]string) error {
	var missing []string
	for _, tr := range triples {
		if !o.HasEvent(tr[0], tr[1], tr[2]) {
			missing = append(missing, strings.TrimSpace(strings.Join(tr[:], " ")))
		}
	}
	if len(missing) > 0 {
		var have []string
		for _, e := range o.Events() {
			have = append(have, e.Title)
		}
		return fmt.Errorf("missing events %q; have %q", missing, have)
	}
	return nil
}

func logTimings(t *testing.T, start time.Time, steps ...any) {
	t.Helper()
	t.Logf("scenario took %s %v", time.Since(start).Round(time.Millisecond), steps)
}

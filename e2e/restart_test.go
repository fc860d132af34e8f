package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestEventSourceRestart ends the all-in-one twice in the middle of a scenario, right after a
// scale-up while the controllers are still reporting it: once with SIGTERM (it drains and saves
// its Event checkpoint), once with SIGKILL (a crash: its checkpoint is up to a few seconds old,
// so Events are sent again). Each time the cluster changes further while it is down, and it is
// started again on the same data dir and checkpoint file. Afterwards, and after a last change
// once it is back, every Event of the namespace (before, around, during and after the stops) is
// a span exactly once, with its latest count: an Event repeated while Kelemetry was down is
// updated, not duplicated nor lost.
func TestEventSourceRestart(t *testing.T) {
	needEnv(t)
	start := time.Now()
	ctx := t.Context()
	ns := newNamespace(t, "evrestart")
	s := session(t, ns)
	const name = "resume"

	// Before: a Deployment with one replica (ScalingReplicaSet, SuccessfulCreate, Scheduled), and
	// an Event of our own about it, which we repeat as a controller's recorder does (count 1).
	if err := s.CreateDeployment(ctx, name, "alpine:3.16", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WaitRolledOut(ctx, name, 1); err != nil {
		t.Fatal(err)
	}
	dep, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	probe, err := kube.CoreV1().Events(ns).Create(ctx, &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: name + ".probe", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: name,
			UID: dep.UID, ResourceVersion: dep.ResourceVersion},
		Reason: "Probe", Message: "probing the Event source", Type: corev1.EventTypeNormal,
		Source: corev1.EventSource{Component: "kelemetry-e2e"}, Count: 1, FirstTimestamp: now, LastTimestamp: now,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Step(fmt.Sprintf("create event %s reason=Probe count=1", probe.Name))
	before := wantNamespaceEvents(t, ns, "before the stops", "ScalingReplicaSet", "SuccessfulCreate", "Scheduled", "Probe")

	// If the test fails while the all-in-one is down, start it again: the next tests need it.
	down := false
	t.Cleanup(func() {
		if down {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := env.StartKelemetry(ctx); err != nil {
				t.Errorf("start the all-in-one again: %v", err)
			}
		}
	})
	var timings []any
	replicas := int32(1)
	for i, stop := range []struct {
		how  string
		stop func() error
	}{{"SIGTERM", env.StopKelemetry}, {"SIGKILL", env.KillKelemetry}} {
		// Scale up and end the all-in-one at once: the controllers report the scale-up around
		// the stop.
		replicas += 2
		if err := s.Scale(ctx, name, replicas); err != nil {
			t.Fatal(err)
		}
		s.Step("stop kelemetry all-in-one with " + stop.how)
		stopAt := time.Now()
		if err := stop.stop(); err != nil {
			t.Fatal(err)
		}
		down = true
		cp := readCheckpoint(t, env.Kelemetry.EventCheckpoint) // still whole after a crash
		if cp.ResourceVersion == "" {
			t.Errorf("after %s: checkpoint %s has no resourceVersion", stop.how, env.Kelemetry.EventCheckpoint)
		}
		if stop.how == "SIGTERM" {
			// Drained and saved: what was sent before is in the checkpoint.
			for _, e := range before {
				count, _, _ := occurrences(&e)
				if got, ok := cp.seen[string(e.UID)]; !ok || got < count {
					t.Errorf("checkpoint: Event %s (%s) sent with count %d, but seen %v with count %d", e.Name, e.Reason, count, ok, got)
				}
			}
		}
		t.Logf("checkpoint after %s: resourceVersion %s, %d Events seen", stop.how, cp.ResourceVersion, len(cp.seen))

		// While it is down: the scale-up completes and is reported (every Pod created so far is
		// scheduled), and our Event repeats (a higher count, a later last occurrence).
		if _, err := s.WaitRolledOut(ctx, name, replicas); err != nil {
			t.Fatal(err)
		}
		if wait := time.Until(probe.LastTimestamp.Add(time.Second)); wait > 0 {
			time.Sleep(wait) // lastTimestamp has second precision
		}
		probe.Count, probe.LastTimestamp = probe.Count+1, metav1.NewTime(time.Now())
		if probe, err = kube.CoreV1().Events(ns).Update(ctx, probe, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		s.Step(fmt.Sprintf("update event %s count=%d", probe.Name, probe.Count))
		eventually(t, clusterTimeout, "the Events of the scale-up to "+fmt.Sprint(replicas), func(ctx context.Context) error {
			evs, err := listEvents(ctx, ns, nil)
			if err != nil {
				return err
			}
			r := reasons(evs)
			if r["Scheduled"] < int(replicas) || r["SuccessfulCreate"] < int(replicas) || r["ScalingReplicaSet"] < i+2 {
				return fmt.Errorf("the cluster lists %v", r)
			}
			return nil
		})

		s.Step("start kelemetry all-in-one")
		restartAt := time.Now()
		if err := env.StartKelemetry(ctx); err != nil {
			t.Fatal(err)
		}
		down = false
		for _, e := range wantNamespaceEvents(t, ns, "after the restart that followed "+stop.how) {
			if e.UID == probe.UID && e.Count != probe.Count {
				t.Errorf("Event %s has count %d, want %d", e.Name, e.Count, probe.Count)
			}
		}
		timings = append(timings, stop.how, fmt.Sprintf("down %s, caught up in %s",
			restartAt.Sub(stopAt).Round(time.Millisecond), time.Since(restartAt).Round(time.Millisecond)))
	}

	// After: the watch goes on from where it resumed.
	if err := s.Scale(ctx, name, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WaitRolledOut(ctx, name, 1); err != nil {
		t.Fatal(err)
	}
	after := wantNamespaceEvents(t, ns, "after scaling down", "SuccessfulDelete")
	t.Logf("Events: %d before the stops, %d at the end %v; event source of the last all-in-one: %s",
		len(before), len(after), reasons(after), eventSourceMetrics(t))
	logTimings(t, start, timings...)
}

// wantNamespaceEvents waits until every Event of the namespace is a span exactly once (see
// matchEvents) and Events of each of the reasons exist, and returns the Events.
func wantNamespaceEvents(t *testing.T, ns, when string, want ...string) []corev1.Event {
	t.Helper()
	var events []corev1.Event
	eventually(t, kelemetryTimeout, "the Events of "+ns+" "+when, func(ctx context.Context) error {
		evs, err := listEvents(ctx, ns, nil)
		if err != nil {
			return err
		}
		for _, r := range want {
			if !slices.ContainsFunc(evs, func(e corev1.Event) bool { return e.Reason == r }) {
				return fmt.Errorf("the cluster lists no %s Event yet", r)
			}
		}
		spans, err := namespaceEventSpans(ctx, ns)
		if err != nil {
			return err
		}
		if err := matchEvents(evs, spans); err != nil {
			return err
		}
		events = evs
		return nil
	})
	return events
}

// checkpoint is what the test reads of the Event checkpoint file: its position and the count
// of each Event seen, by UID.
type checkpoint struct {
	ResourceVersion string
	seen            map[string]int32
}

func readCheckpoint(t *testing.T, path string) checkpoint {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the Event checkpoint: %v", err)
	}
	var raw struct {
		ResourceVersion string `json:"resourceVersion"`
		Seen            []struct {
			UID   string `json:"uid"`
			Count int32  `json:"count"`
		} `json:"seen"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatalf("the Event checkpoint %s: %v", path, err)
	}
	cp := checkpoint{ResourceVersion: raw.ResourceVersion, seen: map[string]int32{}}
	for _, e := range raw.Seen {
		cp.seen[e.UID] = e.Count
	}
	return cp
}

// eventSourceMetrics returns the all-in-one's event source counters, for the log.
func eventSourceMetrics(t *testing.T) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, env.Kelemetry.URL+"/metrics", nil)
	if err != nil {
		return err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err.Error()
	}
	var out []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(line, "kelemetry_event_source_events") {
			out = append(out, line)
		}
	}
	return strings.Join(out, ", ")
}

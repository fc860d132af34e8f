package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kelemetry/kelemetry/e2e/scenario"
)

// criticalAnswer is the part of GET /api/critical-path/{id} the test reads.
type criticalAnswer struct {
	Data struct {
		DurationSeconds float64 `json:"durationSeconds"`
		Steps           []struct {
			Object struct {
				Resource string `json:"resource"`
				Name     string `json:"name"`
			} `json:"object"`
			User        string  `json:"user"`
			Controller  string  `json:"controller"`
			Verb        string  `json:"verb"`
			Subresource string  `json:"subresource"`
			Rule        string  `json:"rule"`
			WaitSeconds float64 `json:"waitSeconds"`
		} `json:"steps"`
		Waits []struct {
			Controller  string  `json:"controller"`
			WaitSeconds float64 `json:"waitSeconds"`
		} `json:"waits"`
		Controllers []struct {
			Controller     string  `json:"controller"`
			MaxWaitSeconds float64 `json:"maxWaitSeconds"`
		} `json:"controllers"`
	} `json:"data"`
}

// getAPIJSON decodes a GET answer of the all-in-one's API.
func getAPIJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// TestCriticalPathSlowScheduling: a Deployment's Pod cannot be scheduled (its node selector and
// toleration fit no node) until a node that fits is added, slowDelay later. The critical path of
// the Deployment's merged trace then runs through the scheduler's binding of that Pod, with a
// wait of at least the delay attributed to kube-scheduler, the longest wait of the path; the
// controllers' reaction times show the same maximum.
func TestCriticalPathSlowScheduling(t *testing.T) {
	needEnv(t)
	const slowDelay = 6 * time.Second
	start := time.Now()
	ctx := t.Context()
	ns := newNamespace(t, "slow")
	s := session(t, ns)
	node := "kwok-slow-" + ns
	label := "kelemetry-e2e/slow"
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = kube.CoreV1().Nodes().Delete(cctx, node, metav1.DeleteOptions{})
	})

	name := "slow"
	dep := scenario.NewDeployment(ns, name, "busybox:1", 1)
	dep.Spec.Template.Spec.NodeSelector = map[string]string{label: ns}
	dep.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: label, Operator: corev1.TolerationOpEqual, Value: ns, Effect: corev1.TaintEffectNoSchedule}}
	if _, err := kube.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	// The Pod exists and is unschedulable before the node comes.
	eventually(t, clusterTimeout, "an unschedulable Pod", func(ctx context.Context) error {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					return nil
				}
			}
		}
		return fmt.Errorf("%d pods, none unschedulable yet", len(pods.Items))
	})
	time.Sleep(time.Until(created.Add(slowDelay)))
	_, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: node,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels:      map[string]string{"type": "kwok", "kubernetes.io/hostname": node, label: ns}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: label, Value: ns, Effect: corev1.TaintEffectNoSchedule}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("step: node %s added %s after the Deployment", node, time.Since(created).Round(time.Millisecond))
	if _, err := s.WaitRolledOut(ctx, name, 1); err != nil {
		t.Fatal(err)
	}
	done := time.Now()

	base := env.Kelemetry.URL
	q := url.Values{
		"service": {"tracing [full tree]"},
		"tags":    {fmt.Sprintf(`{"cluster":%q,"resource":"deployments","namespace":%q,"name":%q}`, clusterName, ns, name)},
		"start":   {strconv.FormatInt(start.Add(-time.Minute).UnixMicro(), 10)},
		"end":     {strconv.FormatInt(done.Add(time.Minute).UnixMicro(), 10)},
	}
	var ans criticalAnswer
	eventually(t, kelemetryTimeout, "the critical path through the slow binding", func(ctx context.Context) error {
		var found struct {
			Data []struct {
				TraceID string `json:"traceID"`
			} `json:"data"`
		}
		if err := getAPIJSON(ctx, base+"/api/traces?"+q.Encode(), &found); err != nil {
			return err
		}
		if len(found.Data) != 1 {
			return fmt.Errorf("%d traces of the Deployment, want 1", len(found.Data))
		}
		ans = criticalAnswer{}
		if err := getAPIJSON(ctx, base+"/api/critical-path/"+found.Data[0].TraceID, &ans); err != nil {
			return err
		}
		var path []string
		bound := -1
		for i, st := range ans.Data.Steps {
			path = append(path, fmt.Sprintf("%s %s %s/%s %s (%.3fs, %s)", st.Controller, st.Verb, st.Object.Resource, st.Subresource, st.Object.Name, st.WaitSeconds, st.Rule))
			if st.Controller == "kube-scheduler" && st.Subresource == "binding" {
				bound = i
			}
		}
		if bound < 0 {
			return fmt.Errorf("no binding on the path %s", strings.Join(path, " -> "))
		}
		// The path must reach the end of the rollout: the Pod started after its binding.
		after := false
		for _, st := range ans.Data.Steps[bound+1:] {
			after = after || (st.Object.Resource == "pods" && st.Subresource == "status")
		}
		if !after {
			return fmt.Errorf("the path ends before the Pod's start: %s", strings.Join(path, " -> "))
		}
		t.Logf("critical path: %s", strings.Join(path, " -> "))
		return nil
	})

	var binding float64
	for _, st := range ans.Data.Steps {
		if st.Controller == "kube-scheduler" && st.Subresource == "binding" {
			if st.User != "system:kube-scheduler" || st.Rule != "schedule" {
				t.Errorf("binding step by %q under rule %q, want system:kube-scheduler and schedule", st.User, st.Rule)
			}
			binding = st.WaitSeconds
		}
	}
	// The Pod was created right after the Deployment, the node slowDelay after that: the scheduler
	// waited nearly all of it.
	if min := (slowDelay - 2*time.Second).Seconds(); binding < min {
		t.Errorf("the binding waited %.3fs, want at least %.0fs", binding, min)
	}
	if len(ans.Data.Waits) == 0 || ans.Data.Waits[0].Controller != "kube-scheduler" {
		t.Errorf("where the time went: %+v, want kube-scheduler first", ans.Data.Waits)
	}
	var sched float64
	for _, c := range ans.Data.Controllers {
		if c.Controller == "kube-scheduler" {
			sched = c.MaxWaitSeconds
		}
	}
	if sched < binding {
		t.Errorf("kube-scheduler's max reaction time %.3fs, less than the path's binding wait %.3fs", sched, binding)
	}
	logTimings(t, start, "binding wait", fmt.Sprintf("%.3fs", binding), "path", fmt.Sprintf("%.3fs", ans.Data.DurationSeconds))
}

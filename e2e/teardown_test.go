package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/e2e/kapi"
	"github.com/kelemetry/kelemetry/e2e/scenario"
)

const (
	namespaceController = "system:serviceaccount:kube-system:namespace-controller"
	garbageCollector    = "system:serviceaccount:kube-system:generic-garbage-collector"
)

// TestNamespaceTeardown: a namespace with a Deployment, a Service and ConfigMaps, one held by a
// finalizer for 5s, is deleted. Every object's trace names the namespace controller's delete
// (collection deletes included) and links to the namespace; the namespace's trace links to all
// of them, says what held it up, and its merged tree (descendants) shows them all, the held
// ConfigMap's wait between its marking and its deletion included.
func TestNamespaceTeardown(t *testing.T) {
	needEnv(t)
	start := time.Now()
	ns := newNamespace(t, "teardown")
	res, err := scenario.Teardown(t.Context(), session(t, ns))
	if err != nil {
		t.Fatal(err)
	}
	logTimings(t, start, "namespace deleted after", res.Deleted.Sub(start).Round(time.Millisecond),
		"gone", res.Gone.Sub(res.Deleted).Round(time.Millisecond))

	deletedBy := func(o kapi.ObjectTraces, users ...string) error {
		for _, e := range o.Events() {
			if slices.Contains(users, e.User) && (e.Verb == "delete" || e.Verb == "deletecollection") {
				return nil
			}
		}
		var have []string
		for _, e := range o.Events() {
			have = append(have, e.Title)
		}
		return fmt.Errorf("no delete by %v; have %q", users, have)
	}
	linksToNamespace := func(o kapi.ObjectTraces) error {
		if !slices.Contains(o.LinksTo(kapi.RoleParent, "namespaces"), ns) {
			return fmt.Errorf("no parent link to namespace %s: %v", ns, o.Links(kapi.RoleParent))
		}
		return nil
	}
	byNamespaceController := func(o kapi.ObjectTraces) error {
		if err := deletedBy(o, namespaceController); err != nil {
			return err
		}
		return linksToNamespace(o)
	}

	traces(t, kapi.Query{Group: "apps", Resource: "deployments", Namespace: ns, Name: res.Deployment}, "the Deployment's trace", func(o kapi.ObjectTraces) error {
		if !o.HasEvent(namespaceController, "deletecollection", "") {
			return fmt.Errorf("no deletecollection by the namespace controller: %v", o.Events())
		}
		return linksToNamespace(o)
	})
	traces(t, kapi.Query{Resource: "services", Namespace: ns, Name: res.Service}, "the Service's trace", byNamespaceController)
	for _, cm := range res.ConfigMaps {
		if cm == res.Held {
			continue
		}
		traces(t, kapi.Query{Resource: "configmaps", Namespace: ns, Name: cm}, "ConfigMap "+cm, byNamespaceController)
	}
	// The ReplicaSets and Pods go either with the namespace or with their owner (the garbage
	// collector), whichever comes first.
	for _, rs := range res.ReplicaSets {
		traces(t, kapi.Query{Group: "apps", Resource: "replicasets", Namespace: ns, Name: rs}, "ReplicaSet "+rs, func(o kapi.ObjectTraces) error {
			return deletedBy(o, namespaceController, garbageCollector)
		})
	}
	for _, pod := range res.Pods {
		traces(t, kapi.Query{Resource: "pods", Namespace: ns, Name: pod}, "Pod "+pod, func(o kapi.ObjectTraces) error {
			return deletedBy(o, namespaceController, garbageCollector)
		})
	}

	// The held ConfigMap: marked for deletion by the namespace controller, deleted by the patch
	// that removed its finalizer.
	var marked, released kapi.Event
	traces(t, kapi.Query{Resource: "configmaps", Namespace: ns, Name: res.Held}, "the held ConfigMap", func(o kapi.ObjectTraces) error {
		marked, released = kapi.Event{}, kapi.Event{}
		for _, e := range o.Events() {
			switch {
			case e.User == namespaceController && strings.HasSuffix(e.Title, "(marked for deletion)"):
				marked = e
			case strings.HasSuffix(e.Title, "(deleted: last finalizer removed)"):
				released = e
			}
		}
		if marked.Title == "" || released.Title == "" {
			return fmt.Errorf("marked %q, released %q; have %v", marked.Title, released.Title, o.Events())
		}
		return linksToNamespace(o)
	})
	t.Logf("held ConfigMap: %q, then %q", marked.Title, released.Title)

	// The namespace: linked to everything its deletion removed, and its status says what held
	// it up.
	nsQuery := kapi.Query{Resource: "namespaces", Name: ns}
	traces(t, nsQuery, "the namespace's trace", func(o kapi.ObjectTraces) error {
		if err := containsAll(o.LinksTo(kapi.RoleChild, "configmaps"), res.ConfigMaps); err != nil {
			return fmt.Errorf("child ConfigMaps: %w", err)
		}
		if err := containsAll(o.LinksTo(kapi.RoleChild, "deployments"), []string{res.Deployment}); err != nil {
			return fmt.Errorf("child Deployments: %w", err)
		}
		if err := containsAll(o.LinksTo(kapi.RoleChild, "services"), []string{res.Service}); err != nil {
			return fmt.Errorf("child Services: %w", err)
		}
		for _, s := range o.SourceSpans(kapi.SourceAudit) {
			for _, m := range s.Messages() {
				if strings.HasPrefix(m, "NamespaceFinalizersRemaining") && strings.Contains(m, scenario.HoldFinalizer) {
					return nil
				}
			}
		}
		return fmt.Errorf("no NamespaceFinalizersRemaining condition naming %s in the namespace's events", scenario.HoldFinalizer)
	})

	// The merged tree of the namespace with its descendants: every object, and the held
	// ConfigMap's marking and deletion at least the hold apart.
	eventually(t, kelemetryTimeout, "the namespace's merged tree", func(ctx context.Context) error {
		tr, err := mergedTrace(ctx, "tree [descendants]", map[string]string{"resource": "namespaces", "name": ns},
			start.Add(-time.Minute), time.Now().Add(time.Minute))
		if err != nil {
			return err
		}
		objects := map[string]bool{}
		var markedAt, releasedAt int64
		for _, s := range tr.Spans {
			if s.Kind() == kapi.KindObject {
				objects[s.Tag("resource")+"/"+s.Tag("name")] = true
			}
			switch {
			case strings.HasSuffix(s.OperationName, "(marked for deletion)") && s.Tag("kelemetry.audit.finalizers") == scenario.HoldFinalizer:
				// The namespace controller repeats its collection deletes until the namespace is
				// empty, and each marks the held ConfigMap again: the wait starts at the first.
				if markedAt == 0 || s.StartTime < markedAt {
					markedAt = s.StartTime
				}
			case strings.HasSuffix(s.OperationName, "(deleted: last finalizer removed)"):
				releasedAt = s.StartTime
			}
		}
		want := []string{"deployments/" + res.Deployment, "services/" + res.Service}
		for _, cm := range res.ConfigMaps {
			want = append(want, "configmaps/"+cm)
		}
		var missing []string
		for _, w := range want {
			if !objects[w] {
				missing = append(missing, w)
			}
		}
		if len(missing) > 0 {
			names := make([]string, 0, len(objects))
			for o := range objects {
				names = append(names, o)
			}
			slices.Sort(names)
			return fmt.Errorf("objects %v missing from the merged tree; it has %v", missing, names)
		}
		if markedAt == 0 || releasedAt == 0 {
			return fmt.Errorf("the held ConfigMap's marking (%d) or deletion (%d) is missing from the merged tree", markedAt, releasedAt)
		}
		if wait := time.Duration(releasedAt-markedAt) * time.Microsecond; wait < scenario.DefaultHold-time.Second {
			return fmt.Errorf("finalizer wait %s, want about %s", wait, scenario.DefaultHold)
		}
		t.Logf("merged tree: %d spans, %d objects, finalizer wait %s", len(tr.Spans), len(objects),
			(time.Duration(releasedAt-markedAt) * time.Microsecond).Round(time.Millisecond))
		return nil
	})
}

// mergedTrace searches the Jaeger-compatible API in one display mode and returns the only
// merged trace found.
func mergedTrace(ctx context.Context, service string, tags map[string]string, from, to time.Time) (kapi.Trace, error) {
	tj, err := json.Marshal(tags)
	if err != nil {
		return kapi.Trace{}, err
	}
	v := url.Values{"service": {service}, "tags": {string(tj)}, "limit": {"20"},
		"start": {strconv.FormatInt(from.UnixMicro(), 10)}, "end": {strconv.FormatInt(to.UnixMicro(), 10)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, api.BaseURL+"/api/traces?"+v.Encode(), nil)
	if err != nil {
		return kapi.Trace{}, err
	}
	resp, err := api.HTTP.Do(req)
	if err != nil {
		return kapi.Trace{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return kapi.Trace{}, fmt.Errorf("GET /api/traces: %s", resp.Status)
	}
	var out struct {
		Data []kapi.Trace `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return kapi.Trace{}, err
	}
	if len(out.Data) != 1 {
		return kapi.Trace{}, fmt.Errorf("%d merged traces, want 1", len(out.Data))
	}
	return out.Data[0], nil
}

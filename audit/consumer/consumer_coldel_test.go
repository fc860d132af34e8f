package consumer

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/diff"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/internal/auditfixture"
	"github.com/kelemetry/kelemetry/internal/changes"
	"github.com/kelemetry/kelemetry/internal/telemetrytest"
	"github.com/kelemetry/kelemetry/telemetry"
)

const nsController = "system:serviceaccount:kube-system:namespace-controller"

// coldelEvents reads a recorded namespace teardown (audit/testdata/deletecollection): the
// namespace controller's deletecollection of deployments, configmaps and widgets (one with a
// finalizer), its delete of a Service, its status update of the namespace, the widget
// controller's patch removing the last finalizer, and alice's `kubectl delete pods -l app=web`.
func coldelEvents(t *testing.T, level string) []*auditv1.Event {
	t.Helper()
	return readEvents(t, filepath.Join("testdata", "deletecollection", level+".jsonl"))
}

// readEvents decodes an audit log of JSON lines.
func readEvents(t *testing.T, path string) []*auditv1.Event {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var events []*auditv1.Event
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		ev, err := auditv1.DecodeEvent([]byte(line))
		require.NoError(t, err)
		events = append(events, ev)
	}
	return events
}

// byObject indexes sent events by "resource/name".
func byObject(t *testing.T, evs []*aggregator.Event) map[string]*aggregator.Event {
	t.Helper()
	m := map[string]*aggregator.Event{}
	for _, ev := range evs {
		k := ev.Object.Resource + "/" + ev.Object.Name
		require.NotContains(t, m, k, "one event per object")
		m[k] = ev
	}
	return m
}

func nsLink(ns string) aggregator.Link {
	return aggregator.Link{Target: aggregator.ObjectRef{Cluster: "c1", Version: "v1", Resource: "namespaces", Name: ns},
		Role: aggregator.RoleParent, Class: linkClassNamespaceDeletion}
}

func logMessages(ev *aggregator.Event, typ string) []string {
	var out []string
	for _, l := range ev.Logs {
		if l.Type == typ {
			out = append(out, l.Message)
		}
	}
	return out
}

// TestConsumerDeleteCollectionRequestResponse: at RequestResponse level, a deletecollection lands
// on the trace of every object in its response, with the object as listed just before the delete as its deletion
// snapshot; objects with finalizers are marked for deletion, and the write that removes the last
// finalizer says it deleted the object. The namespace controller's deletes link each object to
// the namespace; the namespace's status updates say what holds its deletion up.
func TestConsumerDeleteCollectionRequestResponse(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	agg := &aggregatortest.RecordingAggregator{}
	c, err := New(Config{}, Deps{Aggregator: agg, Telemetry: telemetry.Settings{MeterProvider: mp}})
	require.NoError(t, err)
	for _, ev := range coldelEvents(t, "requestresponse") {
		c.Handle(context.Background(), "c1", ev)
	}
	evs := agg.Events()
	require.Len(t, evs, 8)
	objs := byObject(t, []*aggregator.Event{evs[0], evs[1], evs[2], evs[4]})

	web := objs["deployments/web"]
	require.NotNil(t, web)
	assert.Equal(t, aggregator.ObjectRef{Cluster: "c1", Group: "apps", Version: "v1", Resource: "deployments",
		Namespace: "shop", Name: "web", UID: "d6e0c1a2-0001-4a5b-8c9d-000000000001"}, web.Object.ObjectRef)
	assert.Equal(t, "3c9f6a0e-1d2b-4f6e-9a51-0c1f2e3d4a01/ResponseComplete", web.ID)
	assert.Equal(t, nsController+" deletecollection", web.Title)
	assert.Equal(t, time.Date(2026, 11, 30, 10, 0, 1, 100000000, time.UTC), web.Start)
	assert.Equal(t, time.Date(2026, 11, 30, 10, 0, 1, 112000000, time.UTC), web.End)
	attrs := attrMap(web.Attributes)
	assert.Equal(t, "deletecollection", attrs[aggregator.AttrVerb])
	assert.Equal(t, nsController, attrs[aggregator.AttrUser])
	assert.NotContains(t, attrs, attrPropagationPolicy, "Background, the default")
	assert.Equal(t, deletionDeleted, attrs[attrDeletion])
	assert.Equal(t, "1187", attrs[aggregator.AttrNewRV])
	assert.Equal(t, "1", attrs[attrCollectionSize])
	assert.Equal(t, []aggregator.Link{nsLink("shop")}, web.Links)
	// The item is the object as listed just before the delete: its body (with the list's kind and apiVersion, without
	// managedFields) and its deletion snapshot.
	var body struct {
		Kind, APIVersion string
		Metadata         map[string]any
	}
	require.NoError(t, json.Unmarshal(web.Object.Body, &body))
	assert.Equal(t, "Deployment", body.Kind)
	assert.Equal(t, "apps/v1", body.APIVersion)
	assert.NotContains(t, body.Metadata, "managedFields")
	snaps := logsOfType(web, aggregator.LogTypeSnapshot)
	require.Len(t, snaps, 1)
	assert.Contains(t, snaps[0].Attributes, aggregator.Attr{Key: diff.AttrSnapshotKind, Value: "deletion"})
	assert.Contains(t, snaps[0].Message, "nginx:1.27")

	for _, name := range []string{"kube-root-ca.crt", "settings"} {
		cm := objs["configmaps/"+name]
		require.NotNil(t, cm, name)
		assert.Equal(t, nsController+" deletecollection", cm.Title)
		assert.Equal(t, "2", attrMap(cm.Attributes)[attrCollectionSize])
		assert.Equal(t, []aggregator.Link{nsLink("shop")}, cm.Links)
		assert.NotEqual(t, web.Object.Key(), cm.Object.Key())
	}

	held := objs["widgets/held"]
	require.NotNil(t, held)
	assert.Equal(t, nsController+" deletecollection (marked for deletion)", held.Title)
	attrs = attrMap(held.Attributes)
	assert.Equal(t, deletionMarked, attrs[attrDeletion])
	assert.Equal(t, "example.com/hold", attrs[attrFinalizers])
	assert.Equal(t, []aggregator.Link{nsLink("shop")}, held.Links)
	assert.Contains(t, logMessages(held, aggregator.LogTypeMessage), "marked for deletion: waiting for finalizers example.com/hold")

	// The namespace controller deletes Services one by one: linked too.
	svc := evs[3]
	assert.Equal(t, "services", svc.Object.Resource)
	assert.Equal(t, nsController+" delete", svc.Title)
	assert.Equal(t, []aggregator.Link{nsLink("shop")}, svc.Links)

	// The namespace's status says what is left, only the conditions that hold.
	ns := evs[5]
	assert.Equal(t, "namespaces", ns.Object.Resource)
	// kube-apiserver audits requests on a namespace with the namespace set to its name; the
	// namespace is cluster-scoped, and its trace is the one the links point at.
	assert.Equal(t, nsLink("shop").Target.Key(), ns.Object.Key())
	assert.Empty(t, ns.Links)
	assert.Equal(t, []string{
		"NamespaceContentRemaining: SomeResourcesRemain: Some resources are remaining: widgets.example.com has 1 resource instances",
		"NamespaceFinalizersRemaining: SomeFinalizersRemain: Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances",
	}, logMessages(ns, aggregator.LogTypeMessage))

	// The patch that removed the last finalizer deleted the widget: the second step.
	fin := evs[6]
	assert.Equal(t, "widgets", fin.Object.Resource)
	assert.Equal(t, "system:serviceaccount:widgets:widget-controller patch (deleted: last finalizer removed)", fin.Title)
	assert.Equal(t, deletionCompleted, attrMap(fin.Attributes)[attrDeletion])
	assert.Empty(t, fin.Links)

	// kubectl delete pods -l app=web --cascade=foreground: the selector and the policy in the
	// title; not the namespace controller, so no namespace link.
	pod := evs[7]
	assert.Equal(t, "pods", pod.Object.Resource)
	assert.Equal(t, "web-7d9f8-abcde", pod.Object.Name)
	assert.Equal(t, "alice deletecollection labelSelector=app=web propagationPolicy=Foreground (marked for deletion)", pod.Title)
	attrs = attrMap(pod.Attributes)
	assert.Equal(t, "app=web", attrs[attrLabelSelector])
	assert.Equal(t, "Foreground", attrs[attrPropagationPolicy])
	assert.Equal(t, deletionMarked, attrs[attrDeletion])
	assert.Empty(t, pod.Links)
	assert.Equal(t, "foregroundDeletion", attrs[attrFinalizers], "a Foreground delete adds its finalizer")
	assert.Equal(t, []string{"marked for deletion: waiting for finalizers foregroundDeletion"}, logMessages(pod, aggregator.LogTypeMessage))

	byReason := telemetrytest.Sums(t, reader, "result")
	assert.Equal(t, int64(7), byReason["kelemetry.audit.consumer.events{result=sent}"], "audit events, not objects")
}

// TestConsumerDeleteCollectionMetadata: at Metadata level the response is not in the audit
// event: with informers, the collection delete is joined with the deletions the informers saw in
// its namespace and resource around the request.
func TestConsumerDeleteCollectionMetadata(t *testing.T) {
	c, agg, cache := newJoinConsumer(t, InformerJoinConfig{})
	events := coldelEvents(t, "metadata")
	at := func(s string) time.Time {
		ts, err := time.Parse(time.RFC3339Nano, s)
		require.NoError(t, err)
		return ts
	}
	key := func(group, resource, ns, name, rv string) changes.RecordKey {
		return changes.RecordKey{Cluster: "c1", Group: group, Resource: resource, Namespace: ns, Name: name, ResourceVersion: rv}
	}
	del := func(k changes.RecordKey, uid string, final bool, t time.Time) changes.Record {
		return changes.Record{Key: k, Kind: changes.KindDeletion, UID: uid, Final: final, Time: t,
			Snapshot: []byte(`{"metadata":{"name":"` + k.Name + `"}}`)}
	}
	cache.Put(del(key("apps", "deployments", "shop", "web", "1201"), "uid-web", true, at("2026-11-30T10:00:01.150Z")))
	cache.Put(del(key("", "configmaps", "shop", "kube-root-ca.crt", "1203"), "uid-ca", true, at("2026-11-30T10:00:01.160Z")))
	cache.Put(del(key("", "configmaps", "shop", "settings", "1203"), "uid-settings", true, at("2026-11-30T10:00:01.161Z")))
	// Not this request's: another namespace, another resource, a deletion long before.
	cache.Put(del(key("", "configmaps", "other", "settings", "1203"), "uid-other", true, at("2026-11-30T10:00:01.161Z")))
	cache.Put(del(key("", "secrets", "shop", "token", "1203"), "uid-token", true, at("2026-11-30T10:00:01.161Z")))
	cache.Put(del(key("apps", "deployments", "shop", "old", "900"), "uid-old", true, at("2026-11-30T09:50:00Z")))
	// The widget: its deletion start (deletionTimestamp set), then its removal 20s later.
	heldStart := del(key("example.com", "widgets", "shop", "held", "1206"), "uid-held", false, at("2026-11-30T10:00:01.200Z"))
	heldStart.Snapshot = []byte(`{"kind":"Widget","metadata":{"name":"held","finalizers":["example.com/hold"],"deletionTimestamp":"2026-11-30T10:00:01Z"}}`)
	cache.Put(heldStart)
	cache.Put(del(key("example.com", "widgets", "shop", "held", "1240"), "uid-held", true, at("2026-11-30T10:00:21.420Z")))

	// The events are long past: each collection is looked up once.
	for _, ev := range events {
		if ev.Verb == "deletecollection" {
			c.Handle(context.Background(), "c1", ev)
		}
	}
	objs := byObject(t, agg.Events())
	require.Len(t, objs, 4, "the pods were not seen going: nothing to place")

	web := objs["deployments/web"]
	require.NotNil(t, web)
	assert.Equal(t, aggregator.ObjectRef{Cluster: "c1", Group: "apps", Version: "v1", Resource: "deployments",
		Namespace: "shop", Name: "web", UID: "uid-web"}, web.Object.ObjectRef)
	assert.Equal(t, nsController+" deletecollection", web.Title)
	assert.Equal(t, "3c9f6a0e-1d2b-4f6e-9a51-0c1f2e3d4a01/ResponseComplete", web.ID)
	assert.Equal(t, []aggregator.Link{nsLink("shop")}, web.Links)
	attrs := attrMap(web.Attributes)
	assert.Equal(t, deletionDeleted, attrs[attrDeletion])
	assert.NotEmpty(t, attrs[attrInformerLatency])
	require.Len(t, logsOfType(web, aggregator.LogTypeSnapshot), 1)

	for _, name := range []string{"kube-root-ca.crt", "settings"} {
		require.Contains(t, objs, "configmaps/"+name)
		assert.Equal(t, "shop", objs["configmaps/"+name].Object.Namespace)
	}
	held := objs["widgets/held"]
	require.NotNil(t, held)
	assert.Equal(t, nsController+" deletecollection (marked for deletion)", held.Title)
	assert.Equal(t, deletionMarked, attrMap(held.Attributes)[attrDeletion])
	assert.Equal(t, "example.com/hold", attrMap(held.Attributes)[attrFinalizers])
	assert.Contains(t, logMessages(held, aggregator.LogTypeMessage), "marked for deletion: waiting for finalizers example.com/hold")

	// The widget controller's patch removed the last finalizer: the informer saw the widget go.
	var patch *auditv1.Event
	for _, ev := range events {
		if ev.Verb == "patch" {
			patch = ev
		}
	}
	require.NotNil(t, patch)
	c.Handle(context.Background(), "c1", patch)
	evs := agg.Events()
	fin := evs[len(evs)-1]
	assert.Equal(t, "system:serviceaccount:widgets:widget-controller patch (deleted: last finalizer removed)", fin.Title)
	assert.Equal(t, deletionCompleted, attrMap(fin.Attributes)[attrDeletion])
	require.Len(t, logsOfType(fin, aggregator.LogTypeSnapshot), 1, "the deletion snapshot")
}

// TestConsumerDeleteCollectionMetadataLate: the collection waits (without blocking anything)
// for the informer to see its deletions, up to Wait after the request.
func TestConsumerDeleteCollectionMetadataLate(t *testing.T) {
	// Wait bounds the test's time; it is long enough that a loaded machine's pause between Handle
	// and the informer's records below does not end it.
	c, agg, cache := newJoinConsumer(t, InformerJoinConfig{Wait: 2 * time.Second, Interval: 5 * time.Millisecond})
	ctx := context.Background()
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { require.NoError(t, c.Stop(ctx)) })
	now := time.Now()
	dc := auditfixture.MetadataEvent("dc1", "deletecollection", "", "", now)
	dc.RequestURI = "/apis/apps/v1/namespaces/default/deployments?labelSelector=tier%3Dfront"
	c.Handle(ctx, "c1", dc)
	c.Handle(ctx, "c1", consumerEvent())
	require.Len(t, agg.Events(), 1, "the held collection blocks nothing")
	for _, name := range []string{"a", "b"} {
		cache.Put(changes.Record{Key: deployKey(name, "50"), Kind: changes.KindDeletion, Final: true, UID: "uid-" + name, Time: time.Now()})
	}
	require.Eventually(t, func() bool { return len(agg.Events()) == 3 }, 5*time.Second, time.Millisecond)
	objs := byObject(t, agg.Events()[1:])
	for _, name := range []string{"a", "b"} {
		ev := objs["deployments/"+name]
		require.NotNil(t, ev, name)
		assert.Equal(t, "alice deletecollection labelSelector=tier=front", ev.Title)
		assert.Equal(t, "tier=front", attrMap(ev.Attributes)[attrLabelSelector])
		assert.Empty(t, ev.Links, "alice is not the namespace controller")
	}
}

// Without informers, a body-less collection delete cannot be placed: counted as filtered.
func TestConsumerDeleteCollectionNoBodyNoInformer(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	agg := &aggregatortest.RecordingAggregator{}
	c, err := New(Config{}, Deps{Aggregator: agg, Telemetry: telemetry.Settings{MeterProvider: mp}})
	require.NoError(t, err)
	c.Handle(context.Background(), "c1", auditfixture.MetadataEvent("dc1", "deletecollection", "", "", time.Now()))
	assert.Empty(t, agg.Events())
	byReason := telemetrytest.Sums(t, reader, "reason")
	assert.Equal(t, int64(1), byReason["kelemetry.audit.consumer.events{reason=deletecollection}"])
}

// A delete's propagation policy is an attribute; Foreground and Orphan are in the title too.
func TestConsumerDeletePropagationPolicy(t *testing.T) {
	c := newTestConsumer(t, Config{})
	for _, tc := range []struct{ policy, title string }{
		{"Background", "alice delete"},
		{"Foreground", "alice delete propagationPolicy=Foreground"},
		{"Orphan", "alice delete propagationPolicy=Orphan"},
		{"", "alice delete"},
	} {
		ev := consumerEvent()
		ev.Verb = "delete"
		ev.RequestObject = json.RawMessage(`{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/v1","propagationPolicy":"` + tc.policy + `"}`)
		if tc.policy == "" {
			ev.RequestObject = json.RawMessage(`{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/v1","orphanDependents":true}`)
			tc.title = "alice delete propagationPolicy=Orphan"
		}
		out, keep, err := c.Convert("c1", ev)
		require.NoError(t, err)
		require.True(t, keep)
		assert.Equal(t, tc.title, out.Title)
		want := tc.policy
		switch want {
		case "":
			want = "Orphan"
		case "Background":
			want = "" // the default: no attribute
		}
		assert.Equal(t, want, attrMap(out.Attributes)[attrPropagationPolicy])
	}
	// Garbage in the request body is ignored.
	ev := consumerEvent()
	ev.Verb = "delete"
	ev.RequestObject = json.RawMessage(`{"propagationPolicy":[1,2]`)
	out, _, err := c.Convert("c1", ev)
	require.NoError(t, err)
	assert.Equal(t, "alice delete", out.Title)
}

// Selectors come from the request URI; a malformed query is ignored.
func TestCollectionSelectors(t *testing.T) {
	for _, tc := range []struct{ uri, label, field string }{
		{"/api/v1/namespaces/ns/pods", "", ""},
		{"/api/v1/namespaces/ns/pods?labelSelector=app%3Dweb%2Ctier%20in%20(a%2Cb)", "app=web,tier in (a,b)", ""},
		{"/api/v1/namespaces/ns/pods?fieldSelector=status.phase%3DFailed&labelSelector=a%3Db&timeout=30s", "a=b", "status.phase=Failed"},
		{"/api/v1/namespaces/ns/pods?labelSelector=%zz", "", ""},
	} {
		label, field := selectors(tc.uri)
		assert.Equal(t, tc.label, label, tc.uri)
		assert.Equal(t, tc.field, field, tc.uri)
	}
}

// Collection responses that are not lists, or have broken items, place what they can and never
// panic.
func TestConsumerDeleteCollectionOddResponses(t *testing.T) {
	for _, body := range []string{
		`{"kind":"Status","apiVersion":"v1","status":"Success"}`,
		`{"kind":"DeploymentList","apiVersion":"apps/v1","items":null}`,
		`{"kind":"DeploymentList","apiVersion":"apps/v1","items":[1,"x",{"metadata":{}},{"metadata":{"name":"ok"}}]}`,
		`{"kind":"DeploymentList","apiVersion":"apps/v1","items":[{"metadata":{"name":"ok"}}`,
		`[]`,
		`"x"`,
	} {
		agg := &aggregatortest.RecordingAggregator{}
		c, err := New(Config{}, Deps{Aggregator: agg})
		require.NoError(t, err)
		ev := auditfixture.MetadataEvent("dc1", "deletecollection", "", "", time.Now())
		ev.ResponseObject = json.RawMessage(body)
		c.Handle(context.Background(), "c1", ev)
		for _, out := range agg.Events() {
			assert.Equal(t, "ok", out.Object.Name, body)
		}
	}
}

// A foreground delete marks the owner for deletion (finalizer foregroundDeletion); the garbage
// collector's write that removes the finalizer once the dependents are gone deletes it.
func TestConsumerForegroundDeleteSteps(t *testing.T) {
	c := newTestConsumer(t, Config{})
	del := consumerEvent()
	del.Verb = "delete"
	del.RequestObject = json.RawMessage(`{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/v1","propagationPolicy":"Foreground"}`)
	del.ResponseObject = json.RawMessage(`{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web","namespace":"default",` +
		`"uid":"u1","resourceVersion":"43","deletionTimestamp":"2026-11-29T17:09:30Z","deletionGracePeriodSeconds":0,"finalizers":["foregroundDeletion"]}}`)
	out, keep, err := c.Convert("c1", del)
	require.NoError(t, err)
	require.True(t, keep)
	assert.Equal(t, "alice delete propagationPolicy=Foreground (marked for deletion)", out.Title)
	assert.Equal(t, "foregroundDeletion", attrMap(out.Attributes)[attrFinalizers])
	assert.Empty(t, out.Links, "alice is not the namespace controller")

	gc := consumerEvent()
	gc.User.Username = "system:serviceaccount:kube-system:generic-garbage-collector"
	gc.Verb = "patch"
	gc.ResponseObject = json.RawMessage(`{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web","namespace":"default",` +
		`"uid":"u1","resourceVersion":"44","deletionTimestamp":"2026-11-29T17:09:30Z","deletionGracePeriodSeconds":0}}`)
	out, _, err = c.Convert("c1", gc)
	require.NoError(t, err)
	assert.Equal(t, "system:serviceaccount:kube-system:generic-garbage-collector patch (deleted: last finalizer removed)", out.Title)

	// A terminating Pod's status update (grace period running) deletes nothing.
	st := consumerEvent()
	st.ObjectRef = &auditv1.ObjectReference{Resource: "pods", Namespace: "default", Name: "p", APIVersion: "v1"}
	st.ResponseObject = json.RawMessage(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"default",` +
		`"deletionTimestamp":"2026-11-29T17:09:30Z","deletionGracePeriodSeconds":30}}`)
	out, _, err = c.Convert("c1", st)
	require.NoError(t, err)
	assert.Equal(t, "alice update", out.Title)
}

// An old patch behind a held write of the same object is looked up once, with the join's lock
// held: the look-up of the object's removal must not take the lock again.
func TestConsumerInformerJoinFinalizedBehindHeld(t *testing.T) {
	c, agg, _ := newJoinConsumer(t, InformerJoinConfig{Wait: 10 * time.Second, Interval: 5 * time.Millisecond})
	ctx := context.Background()
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { require.NoError(t, c.Stop(ctx)) })
	c.Handle(ctx, "c1", auditfixture.MetadataEvent("u1", "update", "web", "5", time.Now())) // held: no record yet
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Handle(ctx, "c1", auditfixture.MetadataEvent("p1", "patch", "web", "", time.Now().Add(-time.Hour)))
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Handle deadlocked")
	}
	require.Len(t, agg.Events(), 1)
	assert.Equal(t, "p1/ResponseComplete", agg.Events()[0].ID)
}

// BenchmarkConsumerDeleteCollection: a namespace controller's deletecollection of 1,000
// ConfigMaps at RequestResponse level, placed on each ConfigMap's trace (snapshot and stream
// diff included). Reports ns per object.
func BenchmarkConsumerDeleteCollection(b *testing.B) {
	var body strings.Builder
	body.WriteString(`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"9"},"items":[`)
	for i := range 1000 {
		if i > 0 {
			body.WriteByte(',')
		}
		fmt.Fprintf(&body, `{"metadata":{"name":"cm-%d","namespace":"shop","uid":"u-%d","resourceVersion":"%d",`+
			`"labels":{"app":"web"},"managedFields":[{"manager":"kubectl"}]},"data":{"k":"value %d"}}`, i, i, i+1, i)
	}
	body.WriteString(`]}`)
	ev := &auditv1.Event{AuditID: "dc", Stage: "ResponseComplete", Verb: "deletecollection", User: auditv1.UserInfo{Username: nsController},
		ObjectRef: &auditv1.ObjectReference{Resource: "configmaps", Namespace: "shop", APIVersion: "v1"}, RequestURI: "/api/v1/namespaces/shop/configmaps",
		ResponseStatus: &auditv1.Status{Code: 200}, ResponseObject: json.RawMessage(body.String()),
		RequestReceivedTimestamp: consumerT0, StageTimestamp: consumerT0.Add(time.Second)}
	agg := &countingAggregator{}
	c, err := New(Config{}, Deps{Aggregator: agg})
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		c.Handle(context.Background(), "c1", ev)
	}
	b.StopTimer()
	if agg.n != int64(b.N)*1000 {
		b.Fatalf("%d events for %d runs", agg.n, b.N)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(agg.n), "ns/object")
}

type countingAggregator struct{ n int64 }

func (a *countingAggregator) Send(context.Context, *aggregator.Event) error { a.n++; return nil }

func TestPropagationPolicyReadsDeleteOptions(t *testing.T) {
	for body, want := range map[string]string{
		``:     "",
		`null`: "",
		`{}`:   "",
		`{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/v1","propagationPolicy":"Foreground"}`: "Foreground",
		`{"propagationPolicy":"Orphan","gracePeriodSeconds":0}`:                                   "Orphan",
		`{"orphanDependents":true}`:                                                       "Orphan",
		`{"orphanDependents":false}`:                                                      "",
		`{"orphanDependents":null,"propagationPolicy":null}`:                              "",
		`{"propagationPolicy":"Background","orphanDependents":true}`:                      "Background",
		`{"propagationPolicy":5,"orphanDependents":true}`:                                 "Orphan",
		`{"propagationPolicy":"Fore\u0067round"}`:                                         "Foreground",
		`{"propagationPolicy":"Foreground"} x`:                                            "",
		`{"propagationPolicy":"Foreground",`:                                              "",
		`{"propagationPolicy":[1,2]`:                                                      "",
		`{"orphanDependents":"yes"}`:                                                      "",
		`{"dryRun":["All"],"preconditions":{"uid":"u"},"propagationPolicy":"Foreground"}`: "Foreground",
	} {
		assert.Equal(t, want, auditv1.PropagationPolicy([]byte(body)), body)
	}
}

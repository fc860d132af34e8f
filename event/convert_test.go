package event

import (
	"context"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/kube"
	"github.com/kelemetry/kelemetry/telemetry"
)

func fixture(scenario, name string) string { return filepath.Join("..", "testdata", scenario, name) }

func TestReplayRollout(t *testing.T) {
	ctx := context.Background()
	conv := NewConverter("kind", nil, 0)
	var ids = map[string][]string{}
	for _, file := range []string{"events-core-v1.json", "events-events-v1.json"} {
		agg := &aggregatortest.RecordingAggregator{}
		st, err := ReplayFile(ctx, fixture("rollout", file), conv, agg, telemetry.Settings{})
		require.NoError(t, err)
		assert.Equal(t, ReplayStats{File: fixture("rollout", file), Events: 30, Sent: 30}, st)

		var scaling, scheduled int
		for _, ev := range agg.Events() {
			ids[file] = append(ids[file], ev.Object.String()+"|"+ev.ID)
			assert.Equal(t, sourceName, ev.Source)
			assert.False(t, ev.Error)
			require.Len(t, ev.Logs, 1)
			assert.Equal(t, aggregator.LogTypeMessage, ev.Logs[0].Type)
			switch ev.Title {
			case "ScalingReplicaSet":
				scaling++
				assert.Equal(t, aggregator.ObjectRef{Cluster: "kind", Group: "apps", Version: "v1", Resource: "deployments",
					Namespace: "default", Name: "demo", UID: ev.Object.UID}, ev.Object.ObjectRef)
				assert.Contains(t, ev.Logs[0].Message, "Scaled ")
			case "Scheduled":
				scheduled++
				assert.Equal(t, "pods", ev.Object.Resource)
				c, _ := ev.Attributes.Get(attrReportingController)
				assert.Equal(t, "default-scheduler", c)
				assert.Contains(t, ev.Logs[0].Message, "Successfully assigned")
			}
		}
		assert.Equal(t, 10, scaling)
		assert.Equal(t, 6, scheduled)
	}
	// The same Events listed through either API give the same spans.
	sort.Strings(ids["events-core-v1.json"])
	sort.Strings(ids["events-events-v1.json"])
	assert.Equal(t, ids["events-core-v1.json"], ids["events-events-v1.json"])
}

func TestReplayRepeatedEvent(t *testing.T) {
	agg := &aggregatortest.RecordingAggregator{}
	_, err := ReplayFile(context.Background(), fixture("cronjob", "events-core-v1.json"), NewConverter("c", nil, 0), agg, telemetry.Settings{})
	require.NoError(t, err)
	var found bool
	for _, ev := range agg.Events() {
		if ev.Title != "UnexpectedJob" {
			continue
		}
		found = true
		count, _ := ev.Attributes.Get(AttrCount)
		assert.Equal(t, "3", count)
		assert.Equal(t, time.Date(2026, 11, 29, 17, 10, 14, 0, time.UTC), ev.Start)
		assert.Equal(t, time.Date(2026, 11, 29, 17, 10, 16, 0, time.UTC), ev.End)
		assert.Equal(t, "cronjobs", ev.Object.Resource)
		c, _ := ev.Attributes.Get(attrReportingController)
		assert.Equal(t, "cronjob-controller", c)
	}
	assert.True(t, found)
}

const seriesEvent = `{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"web.1","namespace":"default","uid":"e1","resourceVersion":"9"},
"eventTime":"2026-11-29T17:00:00.000000Z","series":{"count":7,"lastObservedTime":"2026-11-29T17:05:00.000000Z"},
"reportingController":"kubelet","reportingInstance":"node-1","action":"Pulling","reason":"BackOff","type":"Warning",
"note":"Back-off pulling image","regarding":{"kind":"Pod","apiVersion":"v1","namespace":"default","name":"web","uid":"p1","fieldPath":"spec.containers{app}"},
"related":{"kind":"Node","apiVersion":"v1","name":"node-1"}}`

func TestConvertEventsV1Series(t *testing.T) {
	rec, err := decode([]byte(seriesEvent))
	require.NoError(t, err)
	ev, err := NewConverter("c", nil, 0).Convert(context.Background(), rec, time.Time{})
	require.NoError(t, err)
	assert.Equal(t, aggregator.ObjectRef{Cluster: "c", Version: "v1", Resource: "pods", Namespace: "default", Name: "web", UID: "p1"}, ev.Object.ObjectRef)
	assert.Equal(t, "BackOff", ev.Title)
	assert.True(t, ev.Error)
	assert.Equal(t, time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC), ev.Start)
	assert.Equal(t, time.Date(2026, 11, 29, 17, 5, 0, 0, time.UTC), ev.End)
	assert.Equal(t, "e1/"+itoa(aggregator.WindowStart(ev.End, aggregator.DefaultWindow).Unix()), ev.ID)
	want := map[string]string{
		attrReason: "BackOff", attrType: "Warning", attrAction: "Pulling", attrReportingController: "kubelet",
		attrReportingInstance: "node-1", AttrCount: "7", attrUID: "e1", attrName: "default/web.1", attrFieldPath: "spec.containers{app}",
		attrRelatedResource: "nodes", attrRelatedName: "node-1",
	}
	for k, v := range want {
		got, ok := ev.Attributes.Get(k)
		assert.True(t, ok, k)
		assert.Equal(t, v, got, k)
	}
	_, ok := ev.Attributes.Get(attrRelatedNamespace)
	assert.False(t, ok, "a Node has no namespace")
	assert.Equal(t, []aggregator.Log{{Time: ev.End, Type: aggregator.LogTypeMessage, Message: "Back-off pulling image"}}, ev.Logs)
}

func TestConvertCore(t *testing.T) {
	raw := `{"apiVersion":"v1","kind":"Event","metadata":{"name":"n.1","namespace":"default","uid":"e2","creationTimestamp":"2026-11-29T17:00:00Z"},
"involvedObject":{"kind":"Node","name":"node-1","namespace":"default"},"reason":"NodeReady","message":"ready","source":{"component":"kubelet","host":"node-1"},
"firstTimestamp":"2026-11-29T17:00:00Z","lastTimestamp":"2026-11-29T17:45:00Z","count":2,"type":"Normal"}`
	rec, err := decode([]byte(raw))
	require.NoError(t, err)
	conv := NewConverter("c", nil, aggregator.Window(30*time.Minute))
	ev, err := conv.Convert(context.Background(), rec, time.Time{})
	require.NoError(t, err)
	assert.Equal(t, "", ev.Object.Namespace, "nodes are cluster-scoped")
	assert.Equal(t, "nodes", ev.Object.Resource)
	c, _ := ev.Attributes.Get(attrReportingController)
	assert.Equal(t, "kubelet", c, "source.component is the fallback")
	// First and last occurrences in different windows: the span is in the window of the last.
	assert.Equal(t, rec.Last, ev.Start)
	assert.False(t, ev.Error)

	_, err = conv.Convert(context.Background(), &record{UID: "x", Last: time.Now()}, time.Time{})
	assert.ErrorIs(t, err, errNoObject)
	_, err = decode([]byte(`{"apiVersion":"example.com/v1"}`))
	assert.Error(t, err)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestRelatedBecomesALink(t *testing.T) {
	conv := NewConverter("c", nil, 0)
	rec, err := decode([]byte(seriesEvent))
	require.NoError(t, err)
	ev, err := conv.Convert(context.Background(), rec, time.Time{})
	require.NoError(t, err)
	assert.Equal(t, []aggregator.Link{{Target: aggregator.ObjectRef{Cluster: "c", Version: "v1", Resource: "nodes", Name: "node-1"},
		Role: aggregator.RoleParent, Class: relatedClass}}, ev.Links)
}

// failedToCreateEndpoint is the Event kube-controller-manager's endpoint controller wrote when
// its create of Endpoints chart-632411/web was refused with 409 AlreadyExists (e2e
// TestHelmChartRBAC): involvedObject is the Endpoints it built, without a namespace, so the
// Event is in "default".
const failedToCreateEndpoint = `{"apiVersion":"v1","kind":"Event","metadata":{"name":"web.18ed3bd83de15b4d","namespace":"default","uid":"0e16b089-64ff-4683-8de8-bdbfbfe80695","creationTimestamp":"2026-12-01T20:40:26Z"},
"involvedObject":{"kind":"Endpoints","name":"web","apiVersion":"v1"},"reason":"FailedToCreateEndpoint",
"message":"Failed to create endpoint for service chart-632411/web: endpoints \"web\" already exists","source":{"component":"endpoint-controller"},
"firstTimestamp":"2026-12-01T20:40:26Z","lastTimestamp":"2026-12-01T20:40:26Z","count":1,"type":"Warning"}`

// scopeFake is a Mapper of another package: its answers count as known.
type scopeFake struct{}

func (f scopeFake) ResourceFor(ctx context.Context, cluster string, gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool, error) {
	return kube.NewStaticMapper().ResourceFor(ctx, cluster, gvk)
}

func TestNamespacedObjectWithoutNamespace(t *testing.T) {
	ctx := context.Background()
	rec, err := decode([]byte(failedToCreateEndpoint))
	require.NoError(t, err)
	rec.Last, rec.First = time.Now(), time.Now()
	core, coreLists := mapperGroup("", "Endpoints", "endpoints", true)
	crd, crdLists := mapperGroup("example.com", "Fleet", "fleets", false)
	discovery := &staticDiscoverer{groups: []*metav1.APIGroup{core, crd}, lists: append(coreLists, crdLists...)}
	dm, err := kube.NewDiscoveryMapper(discoveryClusters{"c": discovery}, kube.DiscoveryConfig{}, telemetry.Settings{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dm.Stop(context.Background()) })
	for name, m := range map[string]kube.Mapper{"static": nil, "discovery": dm, "other": scopeFake{}} {
		conv := NewConverter("test", m, 0)
		_, err := conv.Convert(ctx, rec, time.Time{})
		require.ErrorIs(t, err, errNoObject, "%s: the Endpoints cannot be test//endpoints//web", name)
	}

	// A kind whose scope is only guessed keeps the reference as given: a cluster-scoped custom
	// resource has no namespace.
	fleet := *rec
	fleet.Regarding = corev1.ObjectReference{APIVersion: "example.com/v1", Kind: "Fleet", Name: "f1"}
	ev, err := NewConverter("test", nil, 0).Convert(ctx, &fleet, time.Time{})
	require.NoError(t, err)
	assert.Equal(t, aggregator.ObjectRef{Cluster: "test", Group: "example.com", Version: "v1", Resource: "fleets", Name: "f1"}, ev.Object.ObjectRef)
	ev, err = NewConverter("test", dm, 0).Convert(ctx, &fleet, time.Time{})
	require.NoError(t, err)
	assert.Equal(t, "", ev.Object.Namespace, "discovery: cluster-scoped")

	// With the namespace, the Endpoints is found where it is.
	withNS := *rec
	withNS.Regarding.Namespace = "chart-632411"
	ev, err = NewConverter("test", dm, 0).Convert(ctx, &withNS, time.Time{})
	require.NoError(t, err)
	assert.Equal(t, "test//endpoints/chart-632411/web", ev.Object.Key().String())
}

// mapperGroup is the discovery of one kind in group, version v1.
func mapperGroup(group, kind, resource string, namespaced bool) (*metav1.APIGroup, []*metav1.APIResourceList) {
	gv := schema.GroupVersion{Group: group, Version: "v1"}
	v := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: "v1"}
	return &metav1.APIGroup{Name: group, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v},
		[]*metav1.APIResourceList{{GroupVersion: gv.String(), APIResources: []metav1.APIResource{{Name: resource, Kind: kind, Namespaced: namespaced}}}}
}

type staticDiscoverer struct {
	groups []*metav1.APIGroup
	lists  []*metav1.APIResourceList
}

func (d *staticDiscoverer) ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	return d.groups, d.lists, nil
}

type discoveryClusters map[string]kube.ResourceDiscoverer

func (c discoveryClusters) Discovery(cluster string) (kube.ResourceDiscoverer, error) {
	return c[cluster], nil
}

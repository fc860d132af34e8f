package kelemetrix

import (
	"strings"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/audit/auditv1"
)

func tagOf(t *testing.T, name string, ev *auditv1.Event) string {
	t.Helper()
	id, ok := tagByName(name)
	if !ok {
		t.Fatalf("no tag %q", name)
	}
	return tags[id].value("c1", ev)
}

func TestTagProviders(t *testing.T) {
	pod := &auditv1.ObjectReference{Resource: "pods", Subresource: "status", Namespace: "ns", Name: "p1", APIGroup: "", APIVersion: "v1"}
	dep := &auditv1.ObjectReference{Resource: "deployments", Namespace: "ns", Name: "d", APIGroup: "apps", APIVersion: "v1"}
	cases := []struct {
		tag  string
		ev   *auditv1.Event
		want string
	}{
		{tagCluster, &auditv1.Event{}, "c1"},
		{tagUser, &auditv1.Event{User: auditv1.UserInfo{Username: "alice"}}, "alice"},
		{tagUser, &auditv1.Event{User: auditv1.UserInfo{Username: "system:node:kwok-node-1"}}, "system:node"},
		{tagUser, &auditv1.Event{User: auditv1.UserInfo{Username: "admin"}, ImpersonatedUser: &auditv1.UserInfo{Username: "system:node:n2"}}, "system:node"},
		{tagUser, &auditv1.Event{User: auditv1.UserInfo{Username: "admin"}, ImpersonatedUser: &auditv1.UserInfo{Username: "bob"}}, "bob"},
		{tagUser, &auditv1.Event{User: auditv1.UserInfo{Username: strings.Repeat("u", 500)}}, strings.Repeat("u", maxTagLen)},
		{tagUserAgent, &auditv1.Event{UserAgent: "kube-controller-manager/v1.31.0 (linux/amd64) kubernetes/abc/system:serviceaccount:kube-system:deployment-controller"}, "kube-controller-manager"},
		{tagUserAgent, &auditv1.Event{UserAgent: "kubectl/v1.30.0 (linux/amd64) kubernetes/$Format"}, "kubectl"},
		{tagUserAgent, &auditv1.Event{UserAgent: "kwok"}, "kwok"},
		{tagUserAgent, &auditv1.Event{UserAgent: "curl 8.0"}, "curl"},
		{tagUserAgent, &auditv1.Event{}, ""},
		{tagVerb, &auditv1.Event{Verb: "list"}, "list"},
		{tagCode, &auditv1.Event{ResponseStatus: &auditv1.Status{Code: 409}}, "409"},
		{tagCode, &auditv1.Event{}, ""},
		{tagCodeClass, &auditv1.Event{ResponseStatus: &auditv1.Status{Code: 201}}, "2xx"},
		{tagCodeClass, &auditv1.Event{ResponseStatus: &auditv1.Status{Code: 404}}, "4xx"},
		{tagCodeClass, &auditv1.Event{ResponseStatus: &auditv1.Status{Code: 503}}, "5xx"},
		{tagCodeClass, &auditv1.Event{ResponseStatus: &auditv1.Status{Code: 999}}, ""},
		{tagCodeClass, &auditv1.Event{}, ""},
		{tagErrorReason, &auditv1.Event{ResponseStatus: &auditv1.Status{Code: 409, Reason: "Conflict"}}, "Conflict"},
		{tagErrorReason, &auditv1.Event{ResponseStatus: &auditv1.Status{Code: 200, Reason: "ignored"}}, ""},
		{tagGroup, &auditv1.Event{ObjectRef: dep}, "apps"},
		{tagGroup, &auditv1.Event{}, ""},
		{tagVersion, &auditv1.Event{ObjectRef: dep}, "v1"},
		{tagResource, &auditv1.Event{ObjectRef: pod}, "pods"},
		{tagResource, &auditv1.Event{RequestURI: "/healthz"}, ""},
		{tagSubresource, &auditv1.Event{ObjectRef: pod}, "status"},
		{tagNamespace, &auditv1.Event{ObjectRef: pod}, "ns"},
		{tagName, &auditv1.Event{ObjectRef: pod}, "p1"},
		{tagResourceVersion, &auditv1.Event{RequestURI: "/api/v1/pods?resourceVersion=0&limit=500"}, "zero"},
		{tagResourceVersion, &auditv1.Event{RequestURI: "/api/v1/pods?limit=500"}, "empty"},
		{tagResourceVersion, &auditv1.Event{RequestURI: "/api/v1/pods?resourceVersion="}, "empty"},
		{tagResourceVersion, &auditv1.Event{RequestURI: "/api/v1/pods"}, "empty"},
		{tagResourceVersion, &auditv1.Event{RequestURI: "/api/v1/pods?allowWatchBookmarks=true&resourceVersion=12345&watch=true"}, "other"},
		{tagHasSelector, &auditv1.Event{RequestURI: "/api/v1/pods?labelSelector=app%3Ddemo"}, "true"},
		{tagHasSelector, &auditv1.Event{RequestURI: "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1"}, "true"},
		{tagHasSelector, &auditv1.Event{RequestURI: "/api/v1/pods?labelSelector="}, "false"},
		{tagHasSelector, &auditv1.Event{RequestURI: "/api/v1/pods"}, "false"},
		{tagStage, &auditv1.Event{Stage: "ResponseStarted"}, "ResponseStarted"},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.tag] = true
		if got := tagOf(t, c.tag, c.ev); got != c.want {
			t.Errorf("%s of %+v = %q, want %q", c.tag, c.ev, got, c.want)
		}
	}
	for _, name := range tagNames() {
		if !covered[name] {
			t.Errorf("tag %s has no test case", name)
		}
	}
}

func TestQueryParam(t *testing.T) {
	for _, c := range []struct {
		uri, key, want string
		ok             bool
	}{
		{"/a?x=1&y=2", "y", "2", true},
		{"/a?x=1&y=2", "z", "", false},
		{"/a?labelSelector=a%3Db", "labelSelector", "a=b", true},
		{"/a?labelSelector=a%ZZ", "labelSelector", "a%ZZ", true},
		{"/a", "x", "", false},
		{"/a?x", "x", "", true},
		{"/a?x=1#y=2", "y", "", false},
	} {
		got, ok := queryParam(c.uri, c.key)
		if got != c.want || ok != c.ok {
			t.Errorf("queryParam(%q, %q) = %q, %v; want %q, %v", c.uri, c.key, got, ok, c.want, c.ok)
		}
	}
}

func TestQuantityProviders(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	env := &quantityEnv{now: t0.Add(10 * time.Second), defaultTimeout: time.Minute}
	ev := func(uri string, d time.Duration) *auditv1.Event {
		return &auditv1.Event{RequestURI: uri, RequestReceivedTimestamp: t0, StageTimestamp: t0.Add(d),
			RequestObject: []byte(`{"a":1}`), ResponseObject: []byte(`{"kind":"Pod"}`)}
	}
	cases := []struct {
		q    string
		ev   *auditv1.Event
		want float64
		ok   bool
	}{
		{quantityRequestCount, &auditv1.Event{}, 1, true},
		{quantityLatency, ev("/api/v1/pods", 1500*time.Millisecond), 1.5, true},
		{quantityLatency, &auditv1.Event{StageTimestamp: t0}, 0, false},
		{quantityLatency, ev("/x", -time.Second), 0, false},
		{quantityLatencyRatio, ev("/api/v1/pods", 30*time.Second), 0.5, true},
		{quantityLatencyRatio, ev("/api/v1/pods?timeoutSeconds=10&watch=true", 5*time.Second), 0.5, true},
		{quantityLatencyRatio, ev("/api/v1/pods?timeout=4s", 2*time.Second), 0.5, true},
		{quantityLatencyRatio, ev("/api/v1/pods?timeoutSeconds=abc", 6*time.Second), 0.1, true},
		{quantityRequestSize, ev("/x", 0), 7, true},
		{quantityRequestSize, &auditv1.Event{}, 0, false},
		{quantityResponseSize, ev("/x", 0), 14, true},
		{quantityResponseSize, &auditv1.Event{}, 0, false},
		{quantityDeliveryDelay, ev("/x", 4*time.Second), 6, true},
		{quantityDeliveryDelay, &auditv1.Event{}, 0, false},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.q] = true
		id, _ := quantityByName(c.q)
		got, ok := quantities[id].value(env, c.ev)
		if ok != c.ok || (ok && (got < c.want-1e-9 || got > c.want+1e-9)) {
			t.Errorf("%s of %s = %v, %v; want %v, %v", c.q, c.ev.RequestURI, got, ok, c.want, c.ok)
		}
	}
	for _, name := range quantityNames() {
		if !covered[name] {
			t.Errorf("quantity %s has no test case", name)
		}
	}
}

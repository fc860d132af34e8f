package kelemetrix

import (
	"strings"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/audit"
)

func tagOf(t *testing.T, name string, ev *audit.Event) string {
	t.Helper()
	id, ok := tagByName(name)
	if !ok {
		t.Fatalf("no tag %q", name)
	}
	return tags[id].value("c1", ev)
}

func TestTagProviders(t *testing.T) {
	pod := &audit.ObjectReference{Resource: "pods", Subresource: "status", Namespace: "ns", Name: "p1", APIGroup: "", APIVersion: "v1"}
	dep := &audit.ObjectReference{Resource: "deployments", Namespace: "ns", Name: "d", APIGroup: "apps", APIVersion: "v1"}
	cases := []struct {
		tag  string
		ev   *audit.Event
		want string
	}{
		{TagCluster, &audit.Event{}, "c1"},
		{TagUser, &audit.Event{User: audit.UserInfo{Username: "alice"}}, "alice"},
		{TagUser, &audit.Event{User: audit.UserInfo{Username: "system:node:kwok-node-1"}}, "system:node"},
		{TagUser, &audit.Event{User: audit.UserInfo{Username: "admin"}, ImpersonatedUser: &audit.UserInfo{Username: "system:node:n2"}}, "system:node"},
		{TagUser, &audit.Event{User: audit.UserInfo{Username: "admin"}, ImpersonatedUser: &audit.UserInfo{Username: "bob"}}, "bob"},
		{TagUser, &audit.Event{User: audit.UserInfo{Username: strings.Repeat("u", 500)}}, strings.Repeat("u", maxTagLen)},
		{TagUserAgent, &audit.Event{UserAgent: "kube-controller-manager/v1.31.0 (linux/amd64) kubernetes/abc/system:serviceaccount:kube-system:deployment-controller"}, "kube-controller-manager"},
		{TagUserAgent, &audit.Event{UserAgent: "kubectl/v1.30.0 (linux/amd64) kubernetes/$Format"}, "kubectl"},
		{TagUserAgent, &audit.Event{UserAgent: "kwok"}, "kwok"},
		{TagUserAgent, &audit.Event{UserAgent: "curl 8.0"}, "curl"},
		{TagUserAgent, &audit.Event{}, ""},
		{TagVerb, &audit.Event{Verb: "list"}, "list"},
		{TagCode, &audit.Event{ResponseStatus: &audit.Status{Code: 409}}, "409"},
		{TagCode, &audit.Event{}, ""},
		{TagCodeClass, &audit.Event{ResponseStatus: &audit.Status{Code: 201}}, "2xx"},
		{TagCodeClass, &audit.Event{ResponseStatus: &audit.Status{Code: 404}}, "4xx"},
		{TagCodeClass, &audit.Event{ResponseStatus: &audit.Status{Code: 503}}, "5xx"},
		{TagCodeClass, &audit.Event{ResponseStatus: &audit.Status{Code: 999}}, ""},
		{TagCodeClass, &audit.Event{}, ""},
		{TagErrorReason, &audit.Event{ResponseStatus: &audit.Status{Code: 409, Reason: "Conflict"}}, "Conflict"},
		{TagErrorReason, &audit.Event{ResponseStatus: &audit.Status{Code: 200, Reason: "ignored"}}, ""},
		{TagGroup, &audit.Event{ObjectRef: dep}, "apps"},
		{TagGroup, &audit.Event{}, ""},
		{TagVersion, &audit.Event{ObjectRef: dep}, "v1"},
		{TagResource, &audit.Event{ObjectRef: pod}, "pods"},
		{TagResource, &audit.Event{RequestURI: "/healthz"}, ""},
		{TagSubresource, &audit.Event{ObjectRef: pod}, "status"},
		{TagNamespace, &audit.Event{ObjectRef: pod}, "ns"},
		{TagName, &audit.Event{ObjectRef: pod}, "p1"},
		{TagResourceVersion, &audit.Event{RequestURI: "/api/v1/pods?resourceVersion=0&limit=500"}, "zero"},
		{TagResourceVersion, &audit.Event{RequestURI: "/api/v1/pods?limit=500"}, "empty"},
		{TagResourceVersion, &audit.Event{RequestURI: "/api/v1/pods?resourceVersion="}, "empty"},
		{TagResourceVersion, &audit.Event{RequestURI: "/api/v1/pods"}, "empty"},
		{TagResourceVersion, &audit.Event{RequestURI: "/api/v1/pods?allowWatchBookmarks=true&resourceVersion=12345&watch=true"}, "other"},
		{TagHasSelector, &audit.Event{RequestURI: "/api/v1/pods?labelSelector=app%3Ddemo"}, "true"},
		{TagHasSelector, &audit.Event{RequestURI: "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1"}, "true"},
		{TagHasSelector, &audit.Event{RequestURI: "/api/v1/pods?labelSelector="}, "false"},
		{TagHasSelector, &audit.Event{RequestURI: "/api/v1/pods"}, "false"},
		{TagStage, &audit.Event{Stage: "ResponseStarted"}, "ResponseStarted"},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.tag] = true
		if got := tagOf(t, c.tag, c.ev); got != c.want {
			t.Errorf("%s of %+v = %q, want %q", c.tag, c.ev, got, c.want)
		}
	}
	for _, name := range TagNames() {
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
	ev := func(uri string, d time.Duration) *audit.Event {
		return &audit.Event{RequestURI: uri, RequestReceivedTimestamp: t0, StageTimestamp: t0.Add(d),
			RequestObject: []byte(`{"a":1}`), ResponseObject: []byte(`{"kind":"Pod"}`)}
	}
	cases := []struct {
		q    string
		ev   *audit.Event
		want float64
		ok   bool
	}{
		{QuantityRequestCount, &audit.Event{}, 1, true},
		{QuantityLatency, ev("/api/v1/pods", 1500*time.Millisecond), 1.5, true},
		{QuantityLatency, &audit.Event{StageTimestamp: t0}, 0, false},
		{QuantityLatency, ev("/x", -time.Second), 0, false},
		{QuantityLatencyRatio, ev("/api/v1/pods", 30*time.Second), 0.5, true},
		{QuantityLatencyRatio, ev("/api/v1/pods?timeoutSeconds=10&watch=true", 5*time.Second), 0.5, true},
		{QuantityLatencyRatio, ev("/api/v1/pods?timeout=4s", 2*time.Second), 0.5, true},
		{QuantityLatencyRatio, ev("/api/v1/pods?timeoutSeconds=abc", 6*time.Second), 0.1, true},
		{QuantityRequestSize, ev("/x", 0), 7, true},
		{QuantityRequestSize, &audit.Event{}, 0, false},
		{QuantityResponseSize, ev("/x", 0), 14, true},
		{QuantityResponseSize, &audit.Event{}, 0, false},
		{QuantityDeliveryDelay, ev("/x", 4*time.Second), 6, true},
		{QuantityDeliveryDelay, &audit.Event{}, 0, false},
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
	for _, name := range QuantityNames() {
		if !covered[name] {
			t.Errorf("quantity %s has no test case", name)
		}
	}
}

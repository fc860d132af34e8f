package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/internal/auditfixture"
	"github.com/kelemetry/kelemetry/internal/telemetrytest"
	"github.com/kelemetry/kelemetry/telemetry"
)

var consumerT0 = time.Date(2026, 11, 29, 17, 9, 30, 123456000, time.UTC)

// consumerEvent is a successful update of deployment default/web by alice, returning the object.
func consumerEvent() *auditv1.Event {
	return &auditv1.Event{
		Kind:       "Event",
		APIVersion: "audit.k8s.io/v1",
		AuditID:    "a1",
		Stage:      "ResponseComplete",
		Verb:       "update",
		User:       auditv1.UserInfo{Username: "alice", Groups: []string{"system:authenticated"}},
		SourceIPs:  []string{"10.0.0.1"},
		UserAgent:  "kubectl/v1.37.2",
		ObjectRef: &auditv1.ObjectReference{Resource: "deployments", Namespace: "default", Name: "web", UID: "u1",
			APIGroup: "apps", APIVersion: "v1", ResourceVersion: "41"},
		ResponseStatus: &auditv1.Status{Code: 200},
		RequestObject:  json.RawMessage(`{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web"}}`),
		ResponseObject: json.RawMessage(`{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web",` +
			`"namespace":"default","uid":"u1","resourceVersion":"42","managedFields":[{"manager":"x"}]},"spec":{"replicas":1}}`),
		RequestReceivedTimestamp: consumerT0,
		StageTimestamp:           consumerT0.Add(5 * time.Millisecond),
	}
}

func newTestConsumer(t testing.TB, cfg Config) *Consumer {
	t.Helper()
	c, err := New(cfg, Deps{Aggregator: &aggregatortest.RecordingAggregator{}})
	require.NoError(t, err)
	return c
}

func attrMap(attrs aggregator.Attrs) map[string]string {
	m := make(map[string]string, len(attrs))
	for _, a := range attrs {
		m[a.Key] = a.Value
	}
	return m
}

func TestConsumerConvertUpdate(t *testing.T) {
	c := newTestConsumer(t, Config{})
	ev := consumerEvent()
	out, keep, err := c.Convert("c1", ev)
	require.NoError(t, err)
	require.True(t, keep)

	assert.Equal(t, aggregator.ObjectRef{Cluster: "c1", Group: "apps", Version: "v1", Resource: "deployments",
		Namespace: "default", Name: "web", UID: "u1"}, out.Object.ObjectRef)
	// The body is the response without managedFields (see objdiff.Differ.Snapshot).
	assert.JSONEq(t, `{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web","namespace":"default","uid":"u1",`+
		`"resourceVersion":"42"},"spec":{"replicas":1}}`, string(out.Object.Body))
	assert.Equal(t, "audit", out.Source)
	assert.Equal(t, "a1/ResponseComplete", out.ID)
	assert.Equal(t, "alice update", out.Title)
	assert.Equal(t, ev.RequestReceivedTimestamp, out.Start)
	assert.Equal(t, ev.StageTimestamp, out.End)
	assert.False(t, out.Error)
	assert.Empty(t, out.Logs)
	assert.Equal(t, aggregator.Attrs{
		{Key: aggregator.AttrAuditID, Value: "a1"},
		{Key: aggregator.AttrUser, Value: "alice"},
		{Key: aggregator.AttrUserAgent, Value: "kubectl/v1.37.2"},
		{Key: aggregator.AttrStatusCode, Value: "200"},
		{Key: aggregator.AttrSourceIP, Value: "10.0.0.1"},
		{Key: aggregator.AttrVerb, Value: "update"},
		{Key: aggregator.AttrResourceVersion, Value: "41"},
		{Key: aggregator.AttrNewRV, Value: "42"},
	}, out.Attributes)

	// The body is a copy: the decoded event (and the line or batch it aliases) is not kept.
	ev.ResponseObject[0] = ' '
	assert.Equal(t, byte('{'), out.Object.Body[0])
}

func TestConsumerConvertRules(t *testing.T) {
	deploymentBody := func(name string) json.RawMessage {
		return json.RawMessage(`{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"` + name +
			`","namespace":"default","uid":"u1","resourceVersion":"42"}}`)
	}
	statusBody := json.RawMessage(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201}`)

	type check func(t *testing.T, out *aggregator.Event)
	hasBody := func(want bool) check {
		return func(t *testing.T, out *aggregator.Event) {
			t.Helper()
			if want {
				assert.NotEmpty(t, out.Object.Body, "body")
				assert.Contains(t, attrMap(out.Attributes), aggregator.AttrNewRV)
			} else {
				assert.Nil(t, out.Object.Body, "body")
				assert.NotContains(t, attrMap(out.Attributes), aggregator.AttrNewRV)
			}
		}
	}
	titled := func(title string) check {
		return func(t *testing.T, out *aggregator.Event) { t.Helper(); assert.Equal(t, title, out.Title) }
	}
	attr := func(key, want string) check {
		return func(t *testing.T, out *aggregator.Event) {
			t.Helper()
			got, ok := out.Attributes.Get(key)
			if want == "" {
				assert.False(t, ok, "attribute %s = %q", key, got)
				return
			}
			assert.Equal(t, want, got, key)
		}
	}

	tests := []struct {
		name    string
		cfg     Config
		edit    func(ev *auditv1.Event)
		keep    bool
		invalid bool // want an error wrapping aggregator.ErrInvalidEvent
		checks  []check
	}{
		{name: "update returning the object", keep: true, checks: []check{titled("alice update"), hasBody(true)}},

		// verbs and stages
		{name: "get is not kept", edit: func(ev *auditv1.Event) { ev.Verb = "get" }},
		{name: "list is not kept", edit: func(ev *auditv1.Event) { ev.Verb = "list"; ev.ObjectRef.Name = "" }},
		{name: "watch is not kept", edit: func(ev *auditv1.Event) { ev.Verb = "watch" }},
		{name: "configured verbs", cfg: Config{Verbs: []string{"get"}}, edit: func(ev *auditv1.Event) { ev.Verb = "get" },
			keep: true, checks: []check{titled("alice get")}},
		{name: "configured verbs drop the others", cfg: Config{Verbs: []string{"get"}}},
		{name: "ResponseStarted is not kept", edit: func(ev *auditv1.Event) { ev.Stage = "ResponseStarted" }},
		{name: "RequestReceived is not kept", edit: func(ev *auditv1.Event) { ev.Stage = "RequestReceived" }},
		{name: "configured stages", cfg: Config{Stages: []string{"ResponseStarted"}},
			edit: func(ev *auditv1.Event) { ev.Stage = "ResponseStarted" }, keep: true,
			checks: []check{func(t *testing.T, out *aggregator.Event) { assert.Equal(t, "a1/ResponseStarted", out.ID) }}},

		// objectRef and exclusions
		{name: "no objectRef", edit: func(ev *auditv1.Event) { ev.ObjectRef = nil }},
		{name: "core events excluded", edit: func(ev *auditv1.Event) { ev.ObjectRef.APIGroup, ev.ObjectRef.Resource = "", "events" }},
		{name: "events.k8s.io events excluded",
			edit: func(ev *auditv1.Event) { ev.ObjectRef.APIGroup, ev.ObjectRef.Resource = "events.k8s.io", "events" }},
		{name: "leases excluded",
			edit: func(ev *auditv1.Event) {
				ev.ObjectRef.APIGroup, ev.ObjectRef.Resource = "coordination.k8s.io", "leases"
			}},
		{name: "a bare resource means the core group", keep: true,
			edit: func(ev *auditv1.Event) {
				ev.ObjectRef.APIGroup, ev.ObjectRef.Resource = "example.com", "events"
				ev.ResponseObject = nil
			}},
		{name: "empty exclusion list keeps events", cfg: Config{ExcludeResources: []string{}}, keep: true,
			edit: func(ev *auditv1.Event) {
				ev.ObjectRef.APIGroup, ev.ObjectRef.Resource = "", "events"
				ev.ResponseObject = nil
			}},
		{name: "configured exclusion", cfg: Config{ExcludeResources: []string{"apps/deployments"}}},
		{name: "excluded user agent", cfg: Config{ExcludeUserAgents: []string{"/leader-election"}},
			edit: func(ev *auditv1.Event) { ev.UserAgent = "kube-controller-manager/v1.37.2/leader-election" }},
		{name: "other user agents pass", cfg: Config{ExcludeUserAgents: []string{"/leader-election"}}, keep: true},

		// deletecollection
		{name: "deletecollection names no object", edit: func(ev *auditv1.Event) {
			ev.Verb, ev.ObjectRef.Name, ev.ObjectRef.UID = "deletecollection", "", ""
			ev.ResponseObject = json.RawMessage(`{"kind":"DeploymentList","apiVersion":"apps/v1","metadata":{"resourceVersion":"9"},"items":[]}`)
		}},
		{name: "deletecollection naming an object", keep: true,
			edit:   func(ev *auditv1.Event) { ev.Verb = "deletecollection"; ev.ResponseObject = nil },
			checks: []check{titled("alice deletecollection")}},

		// generateName
		{name: "create with generateName takes the name from the response", keep: true,
			edit: func(ev *auditv1.Event) {
				ev.Verb = "create"
				ev.ObjectRef.Name, ev.ObjectRef.UID, ev.ObjectRef.ResourceVersion = "", "", ""
				ev.ResponseObject = deploymentBody("web-x7k2p")
			},
			checks: []check{hasBody(true), titled("alice create"), attr(aggregator.AttrResourceVersion, ""),
				func(t *testing.T, out *aggregator.Event) {
					assert.Equal(t, "web-x7k2p", out.Object.Name)
					assert.Equal(t, "default", out.Object.Namespace)
					assert.Equal(t, "u1", out.Object.UID)
				}}},
		{name: "create with generateName of a cluster-scoped object takes the namespace-less name", keep: true,
			edit: func(ev *auditv1.Event) {
				ev.Verb = "create"
				ev.ObjectRef = &auditv1.ObjectReference{Resource: "certificatesigningrequests", APIGroup: "certificates.k8s.io", APIVersion: "v1"}
				ev.ResponseObject = json.RawMessage(`{"apiVersion":"certificates.k8s.io/v1","kind":"CertificateSigningRequest",` +
					`"metadata":{"name":"csr-abc","uid":"u9","resourceVersion":"7"}}`)
			},
			checks: []check{func(t *testing.T, out *aggregator.Event) {
				assert.Equal(t, "csr-abc", out.Object.Name)
				assert.Empty(t, out.Object.Namespace)
			}}},
		{name: "failed create with generateName has no name", invalid: true, edit: func(ev *auditv1.Event) {
			ev.Verb = "create"
			ev.ObjectRef.Name, ev.ObjectRef.UID = "", ""
			ev.ResponseStatus = &auditv1.Status{Code: 422, Reason: "Invalid"}
			ev.ResponseObject = json.RawMessage(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","code":422}`)
		}},
		{name: "create with generateName and no response body", invalid: true, edit: func(ev *auditv1.Event) {
			ev.Verb = "create"
			ev.ObjectRef.Name = ""
			ev.ResponseObject = nil
		}},

		// subresources
		{name: "status update lands on the object with its body", keep: true,
			edit:   func(ev *auditv1.Event) { ev.ObjectRef.Subresource = "status" },
			checks: []check{titled("alice update status"), attr(aggregator.AttrSubresource, "status"), hasBody(true)}},
		{name: "pods/binding lands on the pod without the Status body", keep: true,
			edit: func(ev *auditv1.Event) {
				ev.Verb = "create"
				ev.User.Username = "system:kube-scheduler"
				ev.ObjectRef = &auditv1.ObjectReference{Resource: "pods", Namespace: "default", Name: "web-0", APIVersion: "v1", Subresource: "binding"}
				ev.ResponseStatus = &auditv1.Status{Code: 201}
				ev.ResponseObject = statusBody
			},
			checks: []check{titled("system:kube-scheduler create binding"), hasBody(false),
				attr(aggregator.AttrSubresource, "binding"), attr(aggregator.AttrResourceVersion, ""),
				func(t *testing.T, out *aggregator.Event) {
					assert.Equal(t, aggregator.ObjectRef{Cluster: "c1", Version: "v1", Resource: "pods", Namespace: "default",
						Name: "web-0"}, out.Object.ObjectRef)
				}}},
		{name: "scale patch has no Scale body", keep: true,
			edit: func(ev *auditv1.Event) {
				ev.Verb = "patch"
				ev.ObjectRef.Subresource = "scale"
				ev.ResponseObject = json.RawMessage(`{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"web",` +
					`"namespace":"default","uid":"u1","resourceVersion":"43"},"spec":{"replicas":4}}`)
			},
			checks: []check{titled("alice patch scale"), hasBody(false)}},
		{name: "a Scale in the object's own group is still no body", keep: true,
			edit: func(ev *auditv1.Event) {
				ev.ObjectRef.Subresource = ""
				ev.ResponseObject = json.RawMessage(`{"kind":"Scale","apiVersion":"apps/v1","metadata":{"name":"web","namespace":"default"}}`)
			},
			checks: []check{hasBody(false)}},
		{name: "other subresources never give a body", keep: true,
			edit:   func(ev *auditv1.Event) { ev.ObjectRef.Subresource = "ephemeralcontainers" },
			checks: []check{hasBody(false), titled("alice update ephemeralcontainers")}},
		{name: "serviceaccounts/token has no TokenRequest body", keep: true,
			edit: func(ev *auditv1.Event) {
				ev.Verb = "create"
				ev.ObjectRef = &auditv1.ObjectReference{Resource: "serviceaccounts", Namespace: "default", Name: "default",
					APIVersion: "v1", Subresource: "token"}
				ev.ResponseObject = json.RawMessage(`{"kind":"TokenRequest","apiVersion":"authentication.k8s.io/v1",` +
					`"metadata":{"name":"default","namespace":"default"}}`)
			},
			checks: []check{hasBody(false), titled("alice create token")}},
		{name: "eviction has no body", keep: true,
			edit: func(ev *auditv1.Event) {
				ev.Verb = "create"
				ev.ObjectRef = &auditv1.ObjectReference{Resource: "pods", Namespace: "default", Name: "web-0", APIVersion: "v1", Subresource: "eviction"}
				ev.ResponseObject = json.RawMessage(`{"kind":"Eviction","apiVersion":"policy/v1","metadata":{"name":"web-0","namespace":"default"}}`)
			},
			checks: []check{hasBody(false)}},

		// response bodies
		{name: "delete returning Status", keep: true,
			edit: func(ev *auditv1.Event) {
				ev.Verb = "delete"
				ev.ObjectRef.ResourceVersion = ""
				ev.ResponseObject = json.RawMessage(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success",` +
					`"details":{"name":"web","group":"apps","kind":"deployments","uid":"u1"}}`)
			},
			checks: []check{hasBody(false), titled("alice delete")}},
		{name: "delete returning the object (finalizers)", keep: true,
			edit:   func(ev *auditv1.Event) { ev.Verb = "delete"; ev.ResponseObject = deploymentBody("web") },
			checks: []check{hasBody(true), attr(aggregator.AttrNewRV, "42")}},
		{name: "a body of another group is not the object", keep: true,
			edit: func(ev *auditv1.Event) {
				ev.ResponseObject = json.RawMessage(`{"kind":"Deployment","apiVersion":"extensions/v1beta1","metadata":{"name":"web","namespace":"default"}}`)
			},
			checks: []check{hasBody(false)}},
		{name: "a core body for a grouped resource is not the object", keep: true,
			edit: func(ev *auditv1.Event) {
				ev.ResponseObject = json.RawMessage(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web","namespace":"default"}}`)
			},
			checks: []check{hasBody(false)}},
		{name: "a body naming another object is not the object", keep: true,
			edit:   func(ev *auditv1.Event) { ev.ResponseObject = deploymentBody("other") },
			checks: []check{hasBody(false)}},
		{name: "a body with another uid is not the object", keep: true,
			edit:   func(ev *auditv1.Event) { ev.ObjectRef.UID = "u2" },
			checks: []check{hasBody(false)}},
		{name: "DeleteOptions is not the object", keep: true,
			edit: func(ev *auditv1.Event) {
				ev.ResponseObject = json.RawMessage(`{"kind":"DeleteOptions","apiVersion":"apps/v1","metadata":{"name":"web"}}`)
			},
			checks: []check{hasBody(false)}},
		{name: "Binding is not the object", keep: true,
			edit: func(ev *auditv1.Event) {
				ev.ResponseObject = json.RawMessage(`{"kind":"Binding","apiVersion":"apps/v1","metadata":{"name":"web","namespace":"default"}}`)
			},
			checks: []check{hasBody(false)}},
		{name: "a malformed body is ignored", keep: true,
			edit:   func(ev *auditv1.Event) { ev.ResponseObject = json.RawMessage(`{"kind":"Deployment","apiVersion":`) },
			checks: []check{hasBody(false)}},
		{name: "a body that is not an object is ignored", keep: true,
			edit:   func(ev *auditv1.Event) { ev.ResponseObject = json.RawMessage(`[1,2]`) },
			checks: []check{hasBody(false)}},
		{name: "fields in any order, escaped names", keep: true,
			edit: func(ev *auditv1.Event) {
				ev.ResponseObject = json.RawMessage(`{"spec":{"metadata":{"name":"x"}},"metadata":{"resourceVersion":"42",` +
					`"labels":{"a":"b"},"n\u0061me":"web","namespace":"default"},"status":{},"apiVersion":"apps/v1","kind":"Deployment"}`)
			},
			checks: []check{hasBody(true), attr(aggregator.AttrNewRV, "42")}},
		{name: "the request object is never the body", keep: true,
			edit:   func(ev *auditv1.Event) { ev.ResponseObject = nil },
			checks: []check{hasBody(false)}},

		// status, title, errors
		{name: "conflict", keep: true,
			edit: func(ev *auditv1.Event) {
				ev.ObjectRef.Subresource = "status"
				ev.ResponseStatus = &auditv1.Status{Code: 409, Status: "Failure", Reason: "Conflict",
					Message: `Operation cannot be fulfilled on deployments.apps "web"`}
				ev.ResponseObject = statusBody
			},
			checks: []check{titled("alice update status (Conflict)"), hasBody(false), attr(aggregator.AttrStatusCode, "409"),
				func(t *testing.T, out *aggregator.Event) {
					assert.True(t, out.Error)
					assert.Equal(t, []aggregator.Log{{Time: consumerT0.Add(5 * time.Millisecond), Type: aggregator.LogTypeError,
						Message: `Conflict: Operation cannot be fulfilled on deployments.apps "web"`}}, out.Logs)
				}}},
		{name: "invalid with causes", keep: true,
			edit: func(ev *auditv1.Event) {
				ev.Verb = "create"
				ev.ResponseStatus = &auditv1.Status{Code: 422, Status: "Failure", Reason: "Invalid", Message: "web is invalid",
					Details: &auditv1.StatusDetails{Causes: []auditv1.StatusCause{
						{Type: "FieldValueInvalid", Message: "Invalid value: 0", Field: "spec.replicas"},
						{Type: "FieldValueRequired", Message: "Required value"},
					}}}
				ev.ResponseObject = statusBody
			},
			checks: []check{titled("alice create (Unprocessable Entity)"), func(t *testing.T, out *aggregator.Event) {
				at := consumerT0.Add(5 * time.Millisecond)
				assert.Equal(t, []aggregator.Log{
					{Time: at, Type: aggregator.LogTypeError, Message: "Invalid: web is invalid"},
					{Time: at, Type: aggregator.LogTypeCause, Message: "spec.replicas: FieldValueInvalid: Invalid value: 0"},
					{Time: at, Type: aggregator.LogTypeCause, Message: "FieldValueRequired: Required value"},
				}, out.Logs)
			}}},
		{name: "error without reason", keep: true,
			edit: func(ev *auditv1.Event) { ev.ResponseStatus = &auditv1.Status{Code: 500}; ev.ResponseObject = nil },
			checks: []check{titled("alice update (Internal Server Error)"), func(t *testing.T, out *aggregator.Event) {
				require.Len(t, out.Logs, 1)
				assert.Equal(t, "Internal Server Error", out.Logs[0].Message)
			}}},
		{name: "unknown status code", keep: true,
			edit:   func(ev *auditv1.Event) { ev.ResponseStatus = &auditv1.Status{Code: 599} },
			checks: []check{titled("alice update (599)")}},
		{name: "3xx is an error", keep: true,
			edit:   func(ev *auditv1.Event) { ev.ResponseStatus = &auditv1.Status{Code: 304} },
			checks: []check{titled("alice update (Not Modified)")}},
		{name: "nil responseStatus", keep: true,
			edit: func(ev *auditv1.Event) { ev.ResponseStatus = nil },
			checks: []check{titled("alice update"), attr(aggregator.AttrStatusCode, ""),
				func(t *testing.T, out *aggregator.Event) { assert.False(t, out.Error); assert.Empty(t, out.Logs) }}},

		// users
		{name: "impersonation", keep: true,
			edit: func(ev *auditv1.Event) { ev.ImpersonatedUser = &auditv1.UserInfo{Username: "bob"} },
			checks: []check{titled("bob update"), attr(aggregator.AttrUser, "bob"),
				attr(aggregator.AttrImpersonator, "alice")}},
		{name: "impersonation ignored", cfg: Config{IgnoreImpersonation: true}, keep: true,
			edit: func(ev *auditv1.Event) { ev.ImpersonatedUser = &auditv1.UserInfo{Username: "bob"} },
			checks: []check{titled("alice update"), attr(aggregator.AttrUser, "alice"),
				attr(aggregator.AttrImpersonator, "")}},
		{name: "no user", keep: true,
			edit:   func(ev *auditv1.Event) { ev.User = auditv1.UserInfo{} },
			checks: []check{titled("unknown update")}},

		// addresses
		{name: "proxies", keep: true,
			edit: func(ev *auditv1.Event) { ev.SourceIPs = []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"} },
			checks: []check{attr(aggregator.AttrSourceIP, "10.0.0.1"),
				attr(aggregator.AttrProxyIPs, "10.0.0.2,10.0.0.3")}},
		{name: "no proxy", keep: true, checks: []check{attr(aggregator.AttrProxyIPs, "")}},
		{name: "no source IP", keep: true,
			edit:   func(ev *auditv1.Event) { ev.SourceIPs = nil },
			checks: []check{attr(aggregator.AttrSourceIP, ""), attr(aggregator.AttrProxyIPs, "")}},

		// timestamps and IDs
		{name: "end before start", keep: true,
			edit: func(ev *auditv1.Event) { ev.StageTimestamp = consumerT0.Add(-time.Second) },
			checks: []check{func(t *testing.T, out *aggregator.Event) {
				assert.Equal(t, consumerT0, out.Start)
				assert.Equal(t, consumerT0, out.End)
			}}},
		{name: "no request timestamp", keep: true,
			edit: func(ev *auditv1.Event) { ev.RequestReceivedTimestamp = time.Time{} },
			checks: []check{func(t *testing.T, out *aggregator.Event) {
				assert.Equal(t, consumerT0.Add(5*time.Millisecond), out.Start)
				assert.Equal(t, out.Start, out.End)
			}}},
		{name: "no timestamps", invalid: true,
			edit: func(ev *auditv1.Event) { ev.RequestReceivedTimestamp, ev.StageTimestamp = time.Time{}, time.Time{} }},
		{name: "no audit ID", invalid: true, edit: func(ev *auditv1.Event) { ev.AuditID = "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestConsumer(t, tt.cfg)
			ev := consumerEvent()
			if tt.edit != nil {
				tt.edit(ev)
			}
			out, keep, err := c.Convert("c1", ev)
			if tt.invalid {
				require.ErrorIs(t, err, aggregator.ErrInvalidEvent)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tt.keep, keep)
			if !keep {
				assert.Nil(t, out)
				return
			}
			require.NotNil(t, out)
			assert.NotEmpty(t, out.Object.Name)
			assert.False(t, out.End.Before(out.Start))
			for _, chk := range tt.checks {
				chk(t, out)
			}
		})
	}
}

func TestConsumerConvertNil(t *testing.T) {
	c := newTestConsumer(t, Config{})
	out, keep, err := c.Convert("c1", nil)
	require.ErrorIs(t, err, aggregator.ErrInvalidEvent)
	assert.False(t, keep)
	assert.Nil(t, out)
}

func TestConsumerConfig(t *testing.T) {
	require.NoError(t, Config{}.Validate())
	require.NoError(t, Config{ExcludeResources: []string{"pods", "apps/deployments"}}.Validate())
	for _, bad := range []Config{
		{Verbs: []string{""}},
		{Stages: []string{""}},
		{ExcludeResources: []string{""}},
		{ExcludeResources: []string{"/pods"}},
		{ExcludeResources: []string{"apps/"}},
		{ExcludeResources: []string{"a/b/c"}},
		{ExcludeUserAgents: []string{""}},
	} {
		require.Error(t, bad.Validate(), "%+v", bad)
		_, err := New(bad, Deps{Aggregator: &aggregatortest.RecordingAggregator{}})
		require.Error(t, err)
	}
	_, err := New(Config{}, Deps{Aggregator: nil})
	require.Error(t, err)

	d := Config{}.withDefaults()
	assert.Equal(t, defaultVerbs, d.Verbs)
	assert.Equal(t, defaultStages, d.Stages)
	assert.Equal(t, defaultExcludeResources, d.ExcludeResources)
	assert.Empty(t, Config{ExcludeResources: []string{}}.withDefaults().ExcludeResources)
}

func TestConsumerRolloutFixture(t *testing.T) {
	c := newTestConsumer(t, Config{})
	events := auditfixture.Events(t, "rollout")
	require.Len(t, events, 205)

	var kept, bindings, statusUpdates, generated, scales int
	for _, ev := range events {
		out, keep, err := c.Convert("kind", ev)
		require.NoError(t, err, ev.AuditID)
		if !keep {
			// Only reads and Event objects are dropped from this scenario.
			if ev.Verb != "get" && ev.Verb != "list" && ev.Verb != "watch" {
				assert.Equal(t, "events", ev.ObjectRef.Resource, ev.AuditID)
			}
			continue
		}
		kept++
		ref := ev.ObjectRef
		assert.NotEmpty(t, out.Object.Name, ev.AuditID)
		assert.Equal(t, "kind", out.Object.Cluster)
		assert.Equal(t, ref.Resource, out.Object.Resource)
		assert.Equal(t, ref.APIGroup, out.Object.Group)
		assert.Equal(t, ev.AuditID+"/ResponseComplete", out.ID)
		assert.False(t, out.End.Before(out.Start))
		assert.Equal(t, ev.ResponseStatus.Code >= 300, out.Error)

		if out.Object.Body != nil {
			var meta struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Name            string `json:"name"`
					ResourceVersion string `json:"resourceVersion"`
				} `json:"metadata"`
			}
			require.NoError(t, json.Unmarshal(out.Object.Body, &meta))
			assert.NotContains(t, []string{"Status", "Scale", "TokenRequest", "Binding", "Eviction"}, meta.Kind, ev.AuditID)
			group, _, found := strings.Cut(meta.APIVersion, "/")
			if !found {
				group = ""
			}
			assert.Equal(t, out.Object.Group, group)
			assert.Equal(t, out.Object.Name, meta.Metadata.Name)
			newRV, _ := out.Attributes.Get(aggregator.AttrNewRV)
			assert.Equal(t, meta.Metadata.ResourceVersion, newRV)
		}

		switch {
		case ref.Subresource == "binding":
			bindings++
			assert.Equal(t, "system:kube-scheduler create binding", out.Title)
			assert.Equal(t, "pods", out.Object.Resource)
			assert.Equal(t, ref.Name, out.Object.Name)
			assert.Nil(t, out.Object.Body)
		case ref.Subresource == "status" && ev.Verb == "update":
			statusUpdates++
			assert.True(t, strings.HasSuffix(out.Title, " update status") || strings.HasSuffix(out.Title, " update status (Conflict)"),
				out.Title)
			assert.Equal(t, ev.ResponseStatus.Code == 200, out.Object.Body != nil, "a successful status update returns the object")
		case ref.Subresource == "scale":
			scales++
			assert.Equal(t, "admin patch scale", out.Title)
			assert.Nil(t, out.Object.Body)
		case ev.Verb == "create" && ref.Name == "":
			generated++
			assert.True(t, strings.HasPrefix(out.Object.Name, "demo-"), out.Object.Name)
			assert.NotEmpty(t, out.Object.UID)
			assert.NotNil(t, out.Object.Body)
		}
	}
	assert.Equal(t, 142, kept)
	assert.Equal(t, 8, bindings)
	assert.Equal(t, 64, statusUpdates)
	assert.Equal(t, 8, generated)
	assert.Equal(t, 2, scales)
}

func TestConsumerHandleCounts(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	agg := &aggregatortest.RecordingAggregator{}
	c, err := New(Config{}, Deps{Aggregator: agg, Telemetry: telemetry.Settings{MeterProvider: mp}})
	require.NoError(t, err)
	ctx := context.Background()
	for _, ev := range auditfixture.Events(t, "rollout") {
		c.Handle(ctx, "kind", ev)
	}
	dc := consumerEvent()
	dc.Verb, dc.ObjectRef.Name = "deletecollection", ""
	c.Handle(ctx, "kind", dc)
	bad := consumerEvent()
	bad.AuditID = ""
	c.Handle(ctx, "kind", bad)

	sent := agg.Events()
	require.Len(t, sent, 142)
	for _, ev := range sent {
		assert.Equal(t, "kind", ev.Object.Cluster)
	}

	byResult := telemetrytest.Sums(t, reader, "result")
	assert.Equal(t, int64(142), byResult["kelemetry.audit.consumer.events{result=sent}"])
	assert.Equal(t, int64(31+32+1), byResult["kelemetry.audit.consumer.events{result=filtered}"])
	assert.Equal(t, int64(1), byResult["kelemetry.audit.consumer.events{result=invalid}"])
	byReason := telemetrytest.Sums(t, reader, "reason")
	assert.Equal(t, int64(31), byReason["kelemetry.audit.consumer.events{reason=verb}"])
	assert.Equal(t, int64(32), byReason["kelemetry.audit.consumer.events{reason=resource}"])
	assert.Equal(t, int64(1), byReason["kelemetry.audit.consumer.events{reason=deletecollection}"])
	assert.Equal(t, int64(1), byReason["kelemetry.audit.consumer.events{reason=no_audit_id}"])

	// Aggregator failures are counted.
	agg.Err = errors.New("sink down")
	failing := consumerEvent()
	failing.AuditID = "a2" // a1 was the deletecollection's: a repeat
	c.Handle(ctx, "kind", failing)
	byResult = telemetrytest.Sums(t, reader, "result")
	assert.Equal(t, int64(1), byResult["kelemetry.audit.consumer.events{result=send_error}"])
	assert.Equal(t, int64(142), byResult["kelemetry.audit.consumer.events{result=sent}"])
}

// TestConsumerDropsRepeatedEvents: a second delivery of an audit event (same cluster, audit ID and
// stage) is counted as filtered (duplicate) and not sent again, so that it cannot rewrite the
// span of the first with a diff against a later version; the check remembers DedupSize events
// and counts those it forgets.
func TestConsumerDropsRepeatedEvents(t *testing.T) {
	ctx := context.Background()
	withID := func(id, stage string) *auditv1.Event {
		ev := consumerEvent()
		ev.AuditID, ev.Stage = id, stage
		return ev
	}
	for _, tc := range []struct {
		name      string
		size      int
		clusters  []string
		events    []*auditv1.Event
		sent      []string // audit IDs sent, in order
		dups      int64
		evictions int64
	}{
		{name: "repeat dropped", clusters: []string{"c", "c"},
			events: []*auditv1.Event{withID("a1", "ResponseComplete"), withID("a1", "ResponseComplete")},
			sent:   []string{"a1"}, dups: 1},
		{name: "other cluster is another event", clusters: []string{"c", "d"},
			events: []*auditv1.Event{withID("a1", "ResponseComplete"), withID("a1", "ResponseComplete")},
			sent:   []string{"a1", "a1"}},
		{name: "other stage is another event", size: 10, clusters: []string{"c", "c"},
			events: []*auditv1.Event{withID("a1", "ResponseComplete"), withID("a1", "ResponseStarted")},
			sent:   []string{"a1", "a1"}},
		{name: "off", size: -1, clusters: []string{"c", "c"},
			events: []*auditv1.Event{withID("a1", "ResponseComplete"), withID("a1", "ResponseComplete")},
			sent:   []string{"a1", "a1"}},
		{name: "forgotten after size others", size: 2, clusters: []string{"c", "c", "c", "c", "c"},
			events: []*auditv1.Event{withID("a1", "ResponseComplete"), withID("a2", "ResponseComplete"),
				withID("a3", "ResponseComplete"), withID("a3", "ResponseComplete"), withID("a1", "ResponseComplete")},
			sent: []string{"a1", "a2", "a3", "a1"}, dups: 1, evictions: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			agg := &aggregatortest.RecordingAggregator{}
			cfg := Config{DedupSize: tc.size, Stages: []string{"ResponseComplete", "ResponseStarted"}}
			c, err := New(cfg, Deps{Aggregator: agg, Telemetry: telemetry.Settings{MeterProvider: mp}})
			require.NoError(t, err)
			for i, ev := range tc.events {
				c.Handle(ctx, tc.clusters[i], ev)
			}
			var sent []string
			for _, ev := range agg.Events() {
				id, _, _ := strings.Cut(ev.ID, "/")
				sent = append(sent, id)
			}
			assert.Equal(t, tc.sent, sent)
			byReason := telemetrytest.Sums(t, reader, "reason")
			assert.Equal(t, tc.dups, byReason["kelemetry.audit.consumer.events{reason=duplicate}"])
			assert.Equal(t, tc.evictions, telemetrytest.Sums(t, reader, "")["kelemetry.audit.consumer.dedup.evictions"])
		})
	}
}

// BenchmarkConvert converts the events of the bulk fixture (decoded before the timer starts).
func BenchmarkConvert(b *testing.B) {
	events := auditfixture.Events(b, "bulk")
	c := newTestConsumer(b, Config{})
	b.ReportAllocs()
	b.ResetTimer()
	kept := 0
	for i := 0; i < b.N; i++ {
		if _, keep, _ := c.Convert("bulk", events[i%len(events)]); keep {
			kept++
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	_ = kept
}

// BenchmarkConvertBodyMeta compares reading a response body's metadata with the early-exit token
// reader against encoding/json into a small struct.
func BenchmarkConvertBodyMeta(b *testing.B) {
	var bodies [][]byte
	for _, ev := range auditfixture.Events(b, "bulk") {
		if len(ev.ResponseObject) > 0 && ev.ResponseObject[0] == '{' {
			bodies = append(bodies, ev.ResponseObject)
		}
	}
	require.NotEmpty(b, bodies)
	b.Run("scanner", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := auditv1.DecodeBodyMeta(bodies[i%len(bodies)]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			var m struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Name            string `json:"name"`
					Namespace       string `json:"namespace"`
					UID             string `json:"uid"`
					ResourceVersion string `json:"resourceVersion"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(bodies[i%len(bodies)], &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestConvertFingerprintsLinkMetadata(t *testing.T) {
	c, err := New(Config{}, Deps{Aggregator: &aggregatortest.RecordingAggregator{}})
	require.NoError(t, err)
	hash := func(meta string) uint64 {
		t.Helper()
		body := `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm","namespace":"default","resourceVersion":"` +
			fmt.Sprint(len(meta)) + `"` + meta + `},"data":{"k":"v"}}`
		ev := &auditv1.Event{
			AuditID: "a", Stage: "ResponseComplete", Verb: "patch",
			ObjectRef:                &auditv1.ObjectReference{Resource: "configmaps", Namespace: "default", Name: "cm", APIVersion: "v1"},
			ResponseStatus:           &auditv1.Status{Code: 200},
			ResponseObject:           []byte(body),
			RequestReceivedTimestamp: time.Unix(1, 0), StageTimestamp: time.Unix(2, 0),
		}
		out, keep, err := c.Convert("c", ev)
		require.NoError(t, err)
		require.True(t, keep)
		require.NotNil(t, out.Object.Body)
		return out.Object.MetaHash
	}
	plain := hash(``)
	labelled := hash(`,"labels":{"app":"web"}`)
	annotated := hash(`,"labels":{"app":"web"},"annotations":{"kelemetry.io/parent-link":"{}"}`)
	owned := hash(`,"ownerReferences":[{"kind":"Deployment","name":"web","uid":"u","controller":true,"apiVersion":"apps/v1"}]`)
	assert.NotZero(t, plain)
	assert.Equal(t, labelled, hash(`,"labels":{"app":"web"}`), "same metadata, same fingerprint (resourceVersion ignored)")
	assert.Len(t, map[uint64]bool{plain: true, labelled: true, annotated: true, owned: true}, 4)
}

// The consumer's counters are exported at 0 from the start, each result included.
func TestConsumerCountersStartAtZero(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	_, err := New(Config{}, Deps{Aggregator: &aggregatortest.RecordingAggregator{}, Telemetry: telemetry.Settings{MeterProvider: mp}})
	require.NoError(t, err)
	for name, want := range map[string]map[string]int64{
		"kelemetry.audit.consumer.send.retries":                 telemetrytest.Zeros(""),
		"kelemetry.audit.consumer.dedup.evictions":              telemetrytest.Zeros(""),
		"kelemetry.audit.consumer.informer_claims_dropped":      telemetrytest.Zeros(""),
		"kelemetry.audit.consumer.collection_deletions_dropped": telemetrytest.Zeros(""),
		"kelemetry.audit.consumer.informer_diffs": telemetrytest.Zeros("result",
			"hit", "hit_late", "unavailable", "buffer_full", "shutdown", "not_recorded"),
	} {
		assert.Equal(t, want, telemetrytest.Points(t, reader, name), name)
	}
}

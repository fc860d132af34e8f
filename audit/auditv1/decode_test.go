package auditv1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	k8saudit "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/kelemetry/kelemetry/internal/fixture"
)

// assertMatchesAuditV1 compares an event field by field with the same event decoded by
// encoding/json into the full k8s.io/apiserver audit type.
func assertMatchesAuditV1(t *testing.T, want *k8saudit.Event, got *Event, where string) {
	t.Helper()
	assert.Equal(t, want.Kind, got.Kind, where)
	assert.Equal(t, want.APIVersion, got.APIVersion, where)
	assert.Equal(t, string(want.Level), got.Level, where)
	assert.Equal(t, string(want.AuditID), got.AuditID, where)
	assert.Equal(t, string(want.Stage), got.Stage, where)
	assert.Equal(t, want.RequestURI, got.RequestURI, where)
	assert.Equal(t, want.Verb, got.Verb, where)
	assert.Equal(t, want.User.Username, got.User.Username, where)
	assert.Equal(t, want.User.UID, got.User.UID, where)
	assert.Equal(t, want.User.Groups, got.User.Groups, where)
	if want.ImpersonatedUser == nil {
		assert.Nil(t, got.ImpersonatedUser, where)
	} else if assert.NotNil(t, got.ImpersonatedUser, where) {
		assert.Equal(t, want.ImpersonatedUser.Username, got.ImpersonatedUser.Username, where)
		assert.Equal(t, want.ImpersonatedUser.UID, got.ImpersonatedUser.UID, where)
		assert.Equal(t, want.ImpersonatedUser.Groups, got.ImpersonatedUser.Groups, where)
	}
	assert.Equal(t, want.SourceIPs, got.SourceIPs, where)
	assert.Equal(t, want.UserAgent, got.UserAgent, where)
	if want.ObjectRef == nil {
		assert.Nil(t, got.ObjectRef, where)
	} else if assert.NotNil(t, got.ObjectRef, where) {
		w, g := want.ObjectRef, got.ObjectRef
		assert.Equal(t, ObjectReference{
			Resource:        w.Resource,
			Namespace:       w.Namespace,
			Name:            w.Name,
			UID:             string(w.UID),
			APIGroup:        w.APIGroup,
			APIVersion:      w.APIVersion,
			ResourceVersion: w.ResourceVersion,
			Subresource:     w.Subresource,
		}, *g, where)
	}
	if want.ResponseStatus == nil {
		assert.Nil(t, got.ResponseStatus, where)
	} else if assert.NotNil(t, got.ResponseStatus, where) {
		w, g := want.ResponseStatus, got.ResponseStatus
		assert.Equal(t, w.Status, g.Status, where)
		assert.Equal(t, w.Message, g.Message, where)
		assert.Equal(t, string(w.Reason), g.Reason, where)
		assert.Equal(t, w.Code, g.Code, where)
		if w.Details == nil {
			assert.Nil(t, g.Details, where)
		} else if assert.NotNil(t, g.Details, where) {
			var causes []StatusCause
			if w.Details.Causes != nil {
				causes = []StatusCause{}
			}
			for _, c := range w.Details.Causes {
				causes = append(causes, StatusCause{Type: string(c.Type), Message: c.Message, Field: c.Field})
			}
			assert.Equal(t, causes, g.Details.Causes, where)
		}
	}
	if want.RequestObject == nil {
		assert.Nil(t, got.RequestObject, where)
	} else {
		assert.Equal(t, string(want.RequestObject.Raw), string(got.RequestObject), where)
	}
	if want.ResponseObject == nil {
		assert.Nil(t, got.ResponseObject, where)
	} else {
		assert.Equal(t, string(want.ResponseObject.Raw), string(got.ResponseObject), where)
	}
	assert.True(t, want.RequestReceivedTimestamp.Time.Equal(got.RequestReceivedTimestamp), where)
	assert.True(t, want.StageTimestamp.Time.Equal(got.StageTimestamp), where)
	assert.Equal(t, want.Annotations, got.Annotations, where)
}

func TestDecodeEventMatchesAuditV1OnFixtures(t *testing.T) {
	for _, scenario := range fixture.Scenarios {
		t.Run(scenario, func(t *testing.T) {
			lines := fixture.Lines(t, scenario, "audit.jsonl")
			for i, line := range lines {
				var want k8saudit.Event
				require.NoError(t, json.Unmarshal(line, &want))
				got, err := DecodeEvent(line)
				require.NoError(t, err, "line %d", i+1)
				assertMatchesAuditV1(t, &want, got, "line "+strconv.Itoa(i+1))
				if t.Failed() {
					return // one bad line tells enough
				}
			}
		})
	}
}

func TestDecodeEventListMatchesAuditV1OnFixtures(t *testing.T) {
	for _, scenario := range fixture.Scenarios {
		t.Run(scenario, func(t *testing.T) {
			total := 0
			for i, line := range fixture.Lines(t, scenario, "webhook-batches.jsonl") {
				var want k8saudit.EventList
				require.NoError(t, json.Unmarshal(line, &want))
				got, err := DecodeEventList(line)
				require.NoError(t, err, "line %d", i+1)
				require.Len(t, got, len(want.Items), "line %d", i+1)
				for j := range want.Items {
					assertMatchesAuditV1(t, &want.Items[j], got[j], "line "+strconv.Itoa(i+1)+" item "+strconv.Itoa(j))
				}
				if t.Failed() {
					return
				}
				total += len(got)
			}
			assert.Positive(t, total)
		})
	}
}

func TestDecodeEventListAliasesInput(t *testing.T) {
	data := []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` +
		`{"auditID":"a","requestObject":{"x":1},"responseObject": [1, 2] }]}`)
	events, err := DecodeEventList(data)
	require.NoError(t, err)
	require.Len(t, events, 1)
	ev := events[0]
	assert.Equal(t, `{"x":1}`, string(ev.RequestObject))
	assert.Equal(t, `[1, 2]`, string(ev.ResponseObject))
	// The bodies are views of data, capped so that appending to them cannot write into data.
	start := bytes.Index(data, []byte(`{"x":1}`))
	assert.Same(t, &data[start], &ev.RequestObject[0])
	assert.Equal(t, len(ev.RequestObject), cap(ev.RequestObject))
	// Strings are copies.
	copy(data[bytes.Index(data, []byte(`"a"`))+1:], "b")
	assert.Equal(t, "a", ev.AuditID)
}

func TestDecodeEventFields(t *testing.T) {
	ts := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339Nano, s)
		require.NoError(t, err)
		return tm
	}
	tests := []struct {
		name string
		in   string
		want Event
	}{
		{
			name: "all fields",
			in: `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","auditID":"id-1",` +
				`"stage":"ResponseComplete","requestURI":"/api/v1/namespaces/ns/pods/p/status?x=1\u0026y=2","verb":"patch",` +
				`"user":{"username":"system:serviceaccount:kube-system:job-controller","uid":"u1","groups":["g1","g2"],"extra":{"k":["v"]}},` +
				`"impersonatedUser":{"username":"bob","groups":[]},"sourceIPs":["10.0.0.1","::1"],"userAgent":"kubectl/v1",` +
				`"objectRef":{"resource":"pods","namespace":"ns","name":"p","uid":"pu","apiGroup":"","apiVersion":"v1","resourceVersion":"12","subresource":"status"},` +
				`"responseStatus":{"metadata":{},"status":"Failure","message":"pods \"p\" is invalid","reason":"Invalid","code":422,` +
				`"details":{"name":"p","kind":"pods","causes":[{"reason":"FieldValueInvalid","message":"bad","field":"spec.x"},null]}},` +
				`"requestObject":{"a":[1,{"b":null}]},"responseObject":"text",` +
				`"requestReceivedTimestamp":"2026-11-29T17:09:30.123456Z","stageTimestamp":"2026-11-29T18:09:30.123456789+01:00",` +
				`"annotations":{"authorization.k8s.io/decision":"allow","k":null},"unknown":{"deep":[{"x":[]}]}}`,
			want: Event{
				Kind: "Event", APIVersion: "audit.k8s.io/v1", Level: "RequestResponse", AuditID: "id-1",
				Stage: "ResponseComplete", RequestURI: "/api/v1/namespaces/ns/pods/p/status?x=1&y=2", Verb: "patch",
				User:             UserInfo{Username: "system:serviceaccount:kube-system:job-controller", UID: "u1", Groups: []string{"g1", "g2"}},
				ImpersonatedUser: &UserInfo{Username: "bob", Groups: []string{}},
				SourceIPs:        []string{"10.0.0.1", "::1"},
				UserAgent:        "kubectl/v1",
				ObjectRef: &ObjectReference{Resource: "pods", Namespace: "ns", Name: "p", UID: "pu", APIVersion: "v1",
					ResourceVersion: "12", Subresource: "status"},
				ResponseStatus: &Status{Status: "Failure", Message: `pods "p" is invalid`, Reason: "Invalid", Code: 422,
					Details: &StatusDetails{Causes: []StatusCause{{Type: "FieldValueInvalid", Message: "bad", Field: "spec.x"}, {}}}},
				RequestObject:            json.RawMessage(`{"a":[1,{"b":null}]}`),
				ResponseObject:           json.RawMessage(`"text"`),
				RequestReceivedTimestamp: ts("2026-11-29T17:09:30.123456Z"),
				StageTimestamp:           ts("2026-11-29T18:09:30.123456789+01:00"),
				Annotations:              map[string]string{"authorization.k8s.io/decision": "allow", "k": ""},
			},
		},
		{
			name: "nulls",
			in: `{"kind":null,"level":null,"auditID":null,"user":null,"impersonatedUser":null,"sourceIPs":null,` +
				`"objectRef":null,"responseStatus":null,"requestObject":null,"responseObject":null,` +
				`"requestReceivedTimestamp":null,"stageTimestamp":null,"annotations":null}`,
			want: Event{},
		},
		{
			name: "empty object",
			in:   ` { } `,
			want: Event{},
		},
		{
			name: "last duplicate wins",
			in: `{"verb":"get","verb":"list","user":{"username":"a","uid":"x"},"user":{"username":"b"},` +
				`"objectRef":{"name":"a","namespace":"n"},"objectRef":{"name":"b"},"requestObject":{},"requestObject":null,` +
				`"responseStatus":{"code":200},"responseStatus":{"code":404}}`,
			want: Event{Verb: "list", User: UserInfo{Username: "b"}, ObjectRef: &ObjectReference{Name: "b"},
				ResponseStatus: &Status{Code: 404}},
		},
		{
			name: "escapes and unicode",
			in:   `{"auditID":"\u00e9t\u00e9 \ud83d\ude00 \"q\" \\ \/","verb":"gét","user":{"username":"` + "\xff" + `x"}}`,
			want: Event{AuditID: "été 😀 \"q\" \\ /", Verb: "gét", User: UserInfo{Username: "\uFFFDx"}},
		},
		{
			name: "case-sensitive names",
			in:   `{"Verb":"get","AUDITID":"x"}`,
			want: Event{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeEvent([]byte(tt.in))
			require.NoError(t, err)
			assert.True(t, tt.want.RequestReceivedTimestamp.Equal(got.RequestReceivedTimestamp))
			assert.True(t, tt.want.StageTimestamp.Equal(got.StageTimestamp))
			tt.want.RequestReceivedTimestamp, got.RequestReceivedTimestamp = time.Time{}, time.Time{}
			tt.want.StageTimestamp, got.StageTimestamp = time.Time{}, time.Time{}
			got.resp = nil // the decoder's note of the response body (checked in TestResponseMeta)
			assert.Equal(t, tt.want, *got)
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	const list = `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[%s]}`
	items := func(s string) string { return strings.Replace(list, "%s", s, 1) }
	tests := []struct {
		name    string
		in      string
		event   bool // DecodeEvent instead of DecodeEventList
		wantErr string
	}{
		{name: "empty", in: ``, wantErr: "unexpected EOF"},
		{name: "not an object", in: `[]`, wantErr: "want object, got array"},
		{name: "wrong kind", in: `{"kind":"Foo","apiVersion":"audit.k8s.io/v1","items":[]}`, wantErr: `wrong kind "Foo", want EventList`},
		{name: "missing kind", in: `{"apiVersion":"audit.k8s.io/v1","items":[]}`, wantErr: `wrong kind "", want EventList`},
		{name: "wrong apiVersion", in: `{"kind":"EventList","apiVersion":"audit.k8s.io/v1beta1"}`, wantErr: `wrong apiVersion "audit.k8s.io/v1beta1", want audit.k8s.io/v1`},
		{name: "kind not a string", in: `{"kind":1}`, wantErr: "kind: want string, got number"},
		{name: "items not an array", in: `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":{}}`, wantErr: "items: want array, got object"},
		{name: "item kind", in: items(`{},{"kind":"Pod"}`), wantErr: `items[1]: wrong kind "Pod", want Event`},
		{name: "item apiVersion", in: items(`{"kind":"Event","apiVersion":"v1"}`), wantErr: `items[0]: wrong apiVersion "v1", want audit.k8s.io/v1`},
		{name: "null item", in: items(`{},null`), wantErr: "items[1]: null event"},
		{name: "item not an object", in: items(`"x"`), wantErr: "items[0]: want object, got string"},
		{name: "wrong type nested", in: items(`{},{},{"user":{"groups":["a",1]}}`), wantErr: "items[2].user.groups[1]: want string, got number"},
		{name: "wrong type objectRef", in: items(`{"objectRef":{"name":true}}`), wantErr: "items[0].objectRef.name: want string, got boolean"},
		{name: "code not an integer", in: items(`{"responseStatus":{"code":1.5}}`), wantErr: "items[0].responseStatus.code: number 1.5 is not a 32-bit integer"},
		{name: "code overflow", in: items(`{"responseStatus":{"code":2147483648}}`), wantErr: "items[0].responseStatus.code: number 2147483648 is not a 32-bit integer"},
		{name: "bad timestamp", in: items(`{"stageTimestamp":"yesterday"}`), wantErr: "items[0].stageTimestamp: bad timestamp"},
		{name: "timestamp not a string", in: items(`{"stageTimestamp":12}`), wantErr: "items[0].stageTimestamp: want timestamp string, got number"},
		{name: "annotation not a string", in: items(`{"annotations":{"a":"b","c":{}}}`), wantErr: "items[0].annotations.c: want string, got object"},
		{name: "truncated", in: `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"verb":"get"`, wantErr: "unexpected EOF"},
		{name: "truncated body", in: items(`{"requestObject":{"a":[1,2}`), wantErr: "items[0].requestObject: invalid character '}' after array element (want ',' or ']') at offset 86"},
		{name: "trailing data", in: items(``) + `{}`, wantErr: "invalid character '{' after top-level value"},
		{name: "trailing garbage", in: items(``) + `x`, wantErr: "invalid character 'x'"},
		{name: "event wrong kind", event: true, in: `{"kind":"EventList"}`, wantErr: `wrong kind "EventList", want Event`},
		{name: "event bad syntax", event: true, in: `{"verb":"get",}`, wantErr: "invalid character '}' at start of object member name at offset 14"},
		{name: "event trailing", event: true, in: `{} {}`, wantErr: "invalid character '{' after top-level value at offset 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.event {
				_, err = DecodeEvent([]byte(tt.in))
				require.Error(t, err)
				assert.Contains(t, err.Error(), "decode audit event: ")
			} else {
				_, err = DecodeEventList([]byte(tt.in))
				require.Error(t, err)
				assert.Contains(t, err.Error(), "decode audit event list: ")
			}
			assert.Contains(t, err.Error(), tt.wantErr)
			// Whatever we reject here, encoding/json agrees is not a valid event (list) in most
			// cases; the fuzz test checks the other direction.
		})
	}
}

func TestDecodeEventListEmpty(t *testing.T) {
	for _, in := range []string{
		`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[]}`,
		`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":null}`,
		`{"apiVersion":"audit.k8s.io/v1","kind":"EventList"}`,
	} {
		events, err := DecodeEventList([]byte(in))
		require.NoError(t, err, in)
		assert.Empty(t, events, in)
	}
}

func ExampleDecodeEventList() {
	body := []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"auditID":"a1",` +
		`"stage":"ResponseComplete","verb":"create","user":{"username":"admin"},` +
		`"objectRef":{"resource":"deployments","namespace":"default","name":"demo","apiGroup":"apps"},` +
		`"requestObject":{"kind":"Deployment"},"stageTimestamp":"2026-11-29T17:09:30.123456Z"}]}`)
	events, err := DecodeEventList(body)
	if err != nil {
		fmt.Println(err)
		return
	}
	// The bodies alias body: do not reuse it while the events are in use.
	ev := events[0]
	fmt.Println(ev.Verb, ev.ObjectRef.Resource, ev.ObjectRef.Name, string(ev.RequestObject), ev.StageTimestamp.UnixMicro())

	_, err = DecodeEventList([]byte(`{"kind":"Foo","apiVersion":"audit.k8s.io/v1","items":[]}`))
	fmt.Println(err)
	// Output:
	// create deployments demo {"kind":"Deployment"} 1795972170123456
	// decode audit event list: wrong kind "Foo", want EventList
}

// TestDecodeRepeatedStringLists: events whose groups and source IPs repeat the previous event's
// get the same values (one list shared, capped), and a different list is read afresh.
func TestDecodeRepeatedStringLists(t *testing.T) {
	ev := func(id, ips, groups string) string {
		return `{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"` + id + `","stage":"ResponseComplete",` +
			`"verb":"get","user":{"username":"u","groups":` + groups + `},"sourceIPs":` + ips + `}`
	}
	data := []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` +
		ev("a", `["10.0.0.1"]`, `["g1","g2"]`) + `,` +
		ev("b", `["10.0.0.1"]`, `["g1","g2"]`) + `,` +
		ev("c", `["10.0.0.2"]`, `[ "g1" ,"g3"]`) + `,` +
		ev("d", `[]`, `null`) + `]}`)
	events, err := DecodeEventList(data)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ ips, groups []string }{
		{[]string{"10.0.0.1"}, []string{"g1", "g2"}},
		{[]string{"10.0.0.1"}, []string{"g1", "g2"}},
		{[]string{"10.0.0.2"}, []string{"g1", "g3"}},
		{[]string{}, nil},
	}
	for i, w := range want {
		if !reflect.DeepEqual(events[i].SourceIPs, w.ips) || !reflect.DeepEqual(events[i].User.Groups, w.groups) {
			t.Errorf("event %d: sourceIPs %q groups %q, want %q %q", i, events[i].SourceIPs, events[i].User.Groups, w.ips, w.groups)
		}
	}
	if g := events[0].User.Groups; cap(g) != len(g) {
		t.Errorf("shared groups list has room to append: len %d cap %d", len(g), cap(g))
	}
}

package cloudlog

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/audit/auditv1"
)

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}

// ids lists the audit IDs and verbs of events.
func ids(evs []*auditv1.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.AuditID+" "+e.Verb+" "+e.ObjectRef.Resource+"/"+e.ObjectRef.Name)
	}
	return out
}

func TestEKSAndAKS(t *testing.T) {
	for _, tc := range []struct {
		file    string
		formats []Format
		want    []string
		cluster string
	}{
		{"eks-message.json", []Format{FormatAuto, FormatJSON, FormatEKS}, []string{"c401f292-94bc-48e0-9728-6a2159c079bd create pods/"}, ""},
		{"eks-cloudwatch-subscription.json", []Format{FormatAuto, FormatEKS}, []string{
			"8b18663a-fddf-4f65-8369-1048b9c35b1a patch deployments/demo", "0db67492-73ff-4665-b8f9-4f05105d5aa2 create replicasets/demo-7fb4c846ff"}, "prod-1"},
		{"aks-eventhubs.json", []Format{FormatAuto, FormatAKS}, []string{
			"c401f292-94bc-48e0-9728-6a2159c079bd create pods/", "8b18663a-fddf-4f65-8369-1048b9c35b1a patch deployments/demo"}, "aks-prod-1"},
	} {
		for _, f := range tc.formats {
			t.Run(tc.file+"/"+string(f), func(t *testing.T) {
				rec, err := Decode(f, read(t, tc.file))
				require.NoError(t, err)
				assert.Equal(t, tc.want, ids(rec.Events))
				assert.Equal(t, tc.cluster, rec.Cluster)
			})
		}
	}
}

// The events inside the envelopes decode as the audit log's own lines do: same fields, bodies
// kept.
func TestEnvelopesKeepTheEvent(t *testing.T) {
	var sub struct {
		LogEvents []struct{ Message string } `json:"logEvents"`
	}
	require.NoError(t, json.Unmarshal(read(t, "eks-cloudwatch-subscription.json"), &sub))
	want, err := auditv1.DecodeEvent([]byte(sub.LogEvents[0].Message))
	require.NoError(t, err)
	rec, err := Decode(FormatAuto, read(t, "eks-cloudwatch-subscription.json"))
	require.NoError(t, err)
	got := rec.Events[0]
	assert.Equal(t, want.User, got.User)
	assert.Equal(t, want.ObjectRef, got.ObjectRef)
	assert.JSONEq(t, string(want.RequestObject), string(got.RequestObject))
	assert.True(t, want.StageTimestamp.Equal(got.StageTimestamp))
}

func TestSkippedRecords(t *testing.T) {
	for _, name := range []string{"eks-control-message.json", "gke-cluster-api.json"} {
		_, err := Decode(FormatAuto, read(t, name))
		assert.ErrorIs(t, err, ErrNotAuditEvent, name)
	}
	_, err := Decode(FormatAKS, []byte(`{"category":"kube-apiserver","properties":{"log":"I1130 started"}}`))
	require.ErrorIs(t, err, ErrNotAuditEvent)
	_, err = Decode(FormatEKS, []byte(`{"logGroup":"/aws/eks/prod-1/cluster","logStream":"authenticator-0123","logEvents":[{"message":"time=... msg=\"access granted\""}]}`))
	require.ErrorIs(t, err, ErrNotAuditEvent, "another stream of the cluster's log group")
}

func TestBadRecords(t *testing.T) {
	for name, tc := range map[string]struct {
		f    Format
		data string
		msg  string
	}{
		"not an object":        {FormatAuto, `[1]`, "a record is a JSON object"},
		"unknown shape":        {FormatAuto, `{"hello":"world"}`, "unknown record"},
		"unknown format":       {"splunk", `{"auditID":"x"}`, "unknown format"},
		"bad message":          {FormatEKS, `{"logEvents":[{"message":"{\"auditID\":1}"}]}`, "logEvents[0]"},
		"aks log not an event": {FormatAKS, `{"category":"kube-audit","properties":{"log":"not json"}}`, "properties.log"},
		"gke odd method":       {FormatGKE, `{"timestamp":"2026-11-30T17:00:00Z","insertId":"i","protoPayload":{"serviceName":"k8s.io","methodName":"create","resourceName":"core/v1/pods/x"}}`, "methodName"},
		"gke no time":          {FormatGKE, `{"insertId":"i","protoPayload":{"serviceName":"k8s.io","methodName":"io.k8s.core.v1.pods.create","resourceName":"core/v1/namespaces/a/pods/x"}}`, "timestamp"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Decode(tc.f, []byte(tc.data))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

func TestGKE(t *testing.T) {
	rec, err := Decode(FormatAuto, read(t, "gke-pod-create.json"))
	require.NoError(t, err)
	assert.Equal(t, "gke-prod-1", rec.Cluster)
	require.Len(t, rec.Events, 1)
	ev := rec.Events[0]
	assert.Equal(t, "8f2c1d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f", ev.AuditID, "operation.id is the audit ID")
	assert.Equal(t, "ResponseComplete", ev.Stage)
	assert.Equal(t, "create", ev.Verb)
	assert.Equal(t, "RequestResponse", ev.Level)
	assert.Equal(t, &auditv1.ObjectReference{Resource: "pods", Namespace: "shop", Name: "web-7d4b9c6f5-x2k8p", APIVersion: "v1"}, ev.ObjectRef)
	assert.Equal(t, "system:serviceaccount:kube-system:replicaset-controller", ev.User.Username)
	assert.Equal(t, []string{"10.128.0.12"}, ev.SourceIPs)
	assert.Contains(t, ev.UserAgent, "kube-controller-manager/v1.31.4")
	assert.Equal(t, int32(201), ev.ResponseStatus.Code)
	at := time.Date(2026, 11, 30, 17, 0, 5, 123456000, time.UTC)
	assert.True(t, ev.RequestReceivedTimestamp.Equal(at))
	assert.True(t, ev.StageTimestamp.Equal(at))
	var resp map[string]any
	require.NoError(t, json.Unmarshal(ev.ResponseObject, &resp))
	assert.NotContains(t, resp, "@type")
	assert.Equal(t, "Pod", resp["kind"])
	meta, ok := auditv1.ResponseIsObject(ev.ObjectRef, ev)
	assert.True(t, ok, "the response is read as the object, as an audit log's")
	assert.Equal(t, "0f6a1c2e-8b7d-4e5f-9c3a-1d2e3f4a5b6c", meta.UID)

	rec, err = Decode(FormatGKE, read(t, "gke-status-conflict.json"))
	require.NoError(t, err)
	ev = rec.Events[0]
	assert.Equal(t, "update", ev.Verb)
	assert.Equal(t, "status", ev.ObjectRef.Subresource)
	assert.Equal(t, "apps", ev.ObjectRef.APIGroup)
	assert.Equal(t, "deployments", ev.ObjectRef.Resource)
	assert.Equal(t, "web", ev.ObjectRef.Name)
	assert.Equal(t, int32(409), ev.ResponseStatus.Code)
	assert.Contains(t, ev.ResponseStatus.Message, "the object has been modified")
	assert.Equal(t, "Metadata", ev.Level, "no request or response recorded")

	rec, err = Decode(FormatGKE, read(t, "gke-binding-create.json"))
	require.NoError(t, err)
	ev = rec.Events[0]
	assert.Equal(t, "create", ev.Verb)
	assert.Equal(t, "binding", ev.ObjectRef.Subresource)
	assert.Equal(t, "system:kube-scheduler", ev.User.Username)
}

func TestGKEObjectNames(t *testing.T) {
	for _, tc := range []struct {
		method, resource string
		want             auditv1.ObjectReference
		verb             string
	}{
		{"io.k8s.core.v1.namespaces.create", "core/v1/namespaces/shop", auditv1.ObjectReference{Resource: "namespaces", Name: "shop", APIVersion: "v1"}, "create"},
		{"io.k8s.core.v1.nodes.patch", "core/v1/nodes/gke-node-1", auditv1.ObjectReference{Resource: "nodes", Name: "gke-node-1", APIVersion: "v1"}, "patch"},
		{"io.k8s.core.v1.pods.deletecollection", "core/v1/namespaces/shop/pods", auditv1.ObjectReference{Resource: "pods", Namespace: "shop", APIVersion: "v1"}, "deletecollection"},
		{"io.k8s.authorization.rbac.v1.clusterroles.update", "rbac.authorization.k8s.io/v1/clusterroles/view", auditv1.ObjectReference{APIGroup: "rbac.authorization.k8s.io", Resource: "clusterroles", Name: "view", APIVersion: "v1"}, "update"},
		{"io.k8s.apps.v1.deployments.scale.update", "apps/v1/namespaces/shop/deployments/web", auditv1.ObjectReference{APIGroup: "apps", Resource: "deployments", Namespace: "shop", Name: "web", Subresource: "scale", APIVersion: "v1"}, "update"},
	} {
		ref, verb, err := gkeObject(tc.method, tc.resource)
		require.NoError(t, err, tc.method)
		assert.Equal(t, tc.want, *ref, tc.method)
		assert.Equal(t, tc.verb, verb)
	}
}

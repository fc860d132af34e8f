package main

import (
	"context"
	"encoding/json"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/kelemetry/kelemetry/aggregator"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestVolumesLinker(t *testing.T) {
	pod := aggregator.Object{
		ObjectRef: aggregator.ObjectRef{Cluster: "c1", Version: "v1", Resource: "pods", Namespace: "ns", Name: "p"},
		Body: json.RawMessage(`{"kind":"Pod","spec":{"volumes":[
			{"name":"a","configMap":{"name":"settings"}},
			{"name":"b","secret":{"secretName":"token"}},
			{"name":"c","persistentVolumeClaim":{"claimName":"data"}},
			{"name":"d","projected":{"sources":[{"configMap":{"name":"settings"}},{"secret":{"name":"other"}},{"serviceAccountToken":{}}]}},
			{"name":"e","emptyDir":{}}]}}`),
	}
	links, err := VolumesLinker{}.Lookup(context.Background(), pod)
	require.NoError(t, err)
	var got []string
	for _, l := range links {
		assert.Equal(t, aggregator.RoleChild, l.Role)
		assert.Equal(t, "volumes", l.Class)
		assert.Equal(t, "ns", l.Target.Namespace)
		assert.Equal(t, "c1", l.Target.Cluster)
		got = append(got, l.Target.Resource+"/"+l.Target.Name)
	}
	assert.Equal(t, []string{"configmaps/settings", "secrets/token", "persistentvolumeclaims/data", "secrets/other"}, got)

	for _, obj := range []aggregator.Object{
		{ObjectRef: aggregator.ObjectRef{Resource: "pods", Name: "p"}},                                       // no body
		{ObjectRef: aggregator.ObjectRef{Group: "apps", Resource: "deployments", Name: "d"}, Body: pod.Body}, // not a Pod
	} {
		links, err := VolumesLinker{}.Lookup(context.Background(), obj)
		require.NoError(t, err)
		assert.Empty(t, links)
	}
	_, err = VolumesLinker{}.Lookup(context.Background(), aggregator.Object{ObjectRef: pod.ObjectRef, Body: json.RawMessage(`{"spec":{"volumes":"x"}}`)})
	assert.Error(t, err)
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"--nats-url", "nats://a:4222,nats://b:4222", "--subject", "x.y", "--concurrency", "3"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []string{"nats://a:4222", "nats://b:4222"}, o.nats.URLs)
	assert.Equal(t, "x.y", o.worker.Subject)
	assert.Equal(t, 3, o.worker.Concurrency)
	_, err = parseFlags(nil, io.Discard)
	assert.ErrorContains(t, err, "urls")
	_, err = parseFlags([]string{"--nats-url", "nats://a:4222", "--nats-tls-cert", "c.pem"}, io.Discard)
	assert.Error(t, err, "a certificate needs its key")
}

package etcdstore

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	changescfg "github.com/kelemetry/kelemetry/diff/changes"
	etcdcfg "github.com/kelemetry/kelemetry/diff/changes/etcdstore"
	"github.com/kelemetry/kelemetry/internal/changes"
	"github.com/kelemetry/kelemetry/internal/objdiff"
	"github.com/kelemetry/kelemetry/internal/telemetrytest"
	"github.com/kelemetry/kelemetry/telemetry"
)

func depKey(name, rv string) changes.RecordKey {
	return changes.RecordKey{Cluster: "c1", Group: "apps", Resource: "deployments", Namespace: "default", Name: name, ResourceVersion: rv}
}

func changeAt(name, base, rv, path string, at time.Time) changes.Record {
	return changes.Record{Key: depKey(name, rv), Kind: changes.KindChange, BaseRV: base, Time: at,
		Changes: []objdiff.Change{{Path: path, Op: objdiff.OpReplace, Old: json.RawMessage("1"), New: json.RawMessage("2")}}}
}

func TestEtcdKeyRoundTrip(t *testing.T) {
	for _, k := range []changes.RecordKey{
		depKey("web", "12"),
		{Cluster: "c/1", Resource: "namespaces", Name: "kube-system", ResourceVersion: "3"}, // core, cluster-scoped
		{Cluster: "c1", Group: "example.com", Resource: "widgets", Namespace: "ns", Name: "a%b", ResourceVersion: "4"},
	} {
		key := etcdKey("/p/", k)
		assert.Equal(t, 6, strings.Count(strings.TrimPrefix(key, "/p/"), "/")+1, key)
		got, err := parseEtcdKey("/p/", key)
		require.NoError(t, err)
		assert.Equal(t, k, got)
	}
	assert.Equal(t, "/p/c1//pods/default/foo/7", etcdKey("/p/", changes.RecordKey{Cluster: "c1", Resource: "pods", Namespace: "default", Name: "foo", ResourceVersion: "7"}))
	_, err := parseEtcdKey("/p/", "/q/a/b/c/d/e/f")
	require.Error(t, err)
	_, err = parseEtcdKey("/p/", "/p/a/b/c")
	require.Error(t, err)
}

func TestEtcdRecordCodec(t *testing.T) {
	at := time.Unix(1700000000, 123456789)
	big := `{"kind":"ConfigMap","data":{"k":"` + strings.Repeat("abcdefgh", 500) + `"}}`
	for _, rec := range []changes.Record{
		changeAt("web", "5", "6", "spec.replicas", at),
		{Key: depKey("web", "7"), Kind: changes.KindCreation, UID: "u", Snapshot: []byte(big), Time: at},
		{Key: depKey("web", "8"), Kind: changes.KindDeletion, UID: "u", Snapshot: []byte(`{"a":1}`), Final: true, BaseRV: "7", Time: at},
	} {
		val, err := encodeRecord(&rec)
		require.NoError(t, err)
		got, err := decodeRecord(rec.Key, val)
		require.NoError(t, err)
		assert.True(t, got.Time.Equal(rec.Time))
		got.Time = rec.Time
		assert.Equal(t, rec, got)
		if len(rec.Snapshot) > 1000 {
			assert.Equal(t, byte(valueDeflated), val[0])
			assert.Less(t, len(val), len(big)/10, "deflated")
		} else {
			assert.Equal(t, byte(valuePlain), val[0])
		}
	}
	for _, bad := range [][]byte{nil, []byte("x{}"), []byte(`j{"k":9,"t":1}`), []byte("j{"), []byte("z\xff\xff")} {
		_, err := decodeRecord(depKey("web", "1"), bad)
		assert.Error(t, err, "%q", bad)
	}
}

// Missing TLS files fail at construction, with the file named.
func TestNewMissingTLSFiles(t *testing.T) {
	local, err := changes.NewCache(changescfg.CacheConfig{}, telemetry.Settings{})
	require.NoError(t, err)
	_, err = New(etcdcfg.Config{Endpoints: []string{"http://127.0.0.1:2379"}, CAFile: "/nonexistent/ca.pem"}, local, telemetry.Settings{})
	require.ErrorContains(t, err, "/nonexistent/ca.pem")
}

// The etcd store's counters, and its local cache's, are exported at 0 from the start, each
// result, operation and reason included.
func TestCountersStartAtZero(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	ts := telemetry.Settings{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}
	local, err := changes.NewCache(changescfg.CacheConfig{}, ts)
	require.NoError(t, err)
	_, err = New(etcdcfg.Config{Endpoints: []string{"http://127.0.0.1:2379"}}, local, ts)
	require.NoError(t, err)
	assert.Equal(t, telemetrytest.Zeros("result", "written", "queue_full", "too_large", "write_error", "stopped", "replaced", "mirrored", "removed"),
		telemetrytest.Points(t, reader, "kelemetry.diff.etcd.records"))
	assert.Equal(t, telemetrytest.Zeros("op", "connect", "lease", "put", "load", "watch", "decode", "encode"),
		telemetrytest.Points(t, reader, "kelemetry.diff.etcd.errors"))
	assert.Equal(t, telemetrytest.Zeros("reason", "expired", "entries", "bytes", "replaced", "removed"),
		telemetrytest.Points(t, reader, "kelemetry.diff.informer.cache.evictions"))
}

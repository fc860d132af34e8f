package natsqueue

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// TestConfigHasConnKeys: Config holds every connection setting of Conn under the same key and
// type, and Config.Conn copies each of them.
func TestConfigHasConnKeys(t *testing.T) {
	cfgFields := map[string]reflect.StructField{}
	for f := range reflect.TypeFor[Config]().Fields() {
		cfgFields[f.Tag.Get("yaml")] = f
	}
	full := reflect.ValueOf(&Conn{}).Elem()
	for i, f := range reflect.VisibleFields(reflect.TypeFor[Conn]()) {
		cf, ok := cfgFields[f.Tag.Get("yaml")]
		if assert.True(t, ok, "Config lacks %s", f.Name) {
			assert.Equal(t, f.Name, cf.Name)
			assert.Equal(t, f.Type, cf.Type, f.Name)
		}
		switch v := full.Field(i); v.Kind() {
		case reflect.String:
			v.SetString("x")
		case reflect.Int64:
			v.SetInt(int64(time.Second))
		case reflect.Slice:
			v.Set(reflect.ValueOf([]string{"nats://x"}))
		case reflect.Struct:
			v.Set(reflect.ValueOf(tlsConfig{CAFile: "ca", CertFile: "c", KeyFile: "k"}))
		default:
			t.Fatalf("%s: set a %s in the test", f.Name, v.Kind())
		}
	}
	var cfg Config
	cv := reflect.ValueOf(&cfg).Elem()
	for f := range reflect.TypeFor[Conn]().Fields() {
		cv.FieldByName(f.Name).Set(full.FieldByName(f.Name))
	}
	assert.Equal(t, full.Interface(), cfg.Conn())
}

func TestConnValidateAndDefaults(t *testing.T) {
	tests := []struct {
		name string
		conn Conn
		want string
	}{
		{"ok", Conn{URLs: []string{"nats://x"}}, ""},
		{"no urls", Conn{}, "urls"},
		{"half cert", Conn{URLs: []string{"n"}, TLS: tlsConfig{KeyFile: "x"}}, "certFile and keyFile"},
		{"both creds", Conn{URLs: []string{"n"}, CredentialsFile: "a", NKeySeedFile: "b"}, "exclusive"},
		{"missing file", Conn{URLs: []string{"n"}, NKeySeedFile: "/nonexistent"}, "nkeySeedFile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.conn.Validate()
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tt.want)
		})
	}
	d := Conn{}.WithDefaults()
	assert.Equal(t, Conn{Name: "kelemetry", ConnectTimeout: 5 * time.Second, ReconnectWait: 200 * time.Millisecond,
		MaxReconnectWait: 5 * time.Second}, d)
	assert.Equal(t, Config{}.WithDefaults().Conn(), d, "the same defaults as Config's")
}

func decodeStrict(data string, v any) error {
	dec := yaml.NewDecoder(strings.NewReader(data))
	dec.KnownFields(true)
	return dec.Decode(v)
}

// TestConnYAML: Conn takes the connection keys of Config, refuses its stream keys saying why, and
// stays strict about unknown keys (Node.Decode alone would not be).
func TestConnYAML(t *testing.T) {
	var c Conn
	require.NoError(t, decodeStrict(`
urls: [tls://nats:4222]
tls: {caFile: /ca.crt}
credentialsFile: /creds
connectTimeout: 2s
name: me
`, &c))
	assert.Equal(t, Conn{URLs: []string{"tls://nats:4222"}, TLS: tlsConfig{CAFile: "/ca.crt"}, CredentialsFile: "/creds",
		ConnectTimeout: 2 * time.Second, Name: "me"}, c)

	err := decodeStrict("urls: [nats://x]\nstream: S\npartitions: 4\n", &c)
	assert.ErrorContains(t, err, "line 2: stream is a setting of the audit queue's stream (audit.queue.nats), not of a NATS connection")
	assert.ErrorContains(t, err, "line 3: partitions is a setting")
	assert.ErrorContains(t, err, "urls, tls, credentialsFile, nkeySeedFile, connectTimeout, reconnectWait, maxReconnectWait, name")
	assert.ErrorContains(t, decodeStrict("urlz: [nats://x]\n", &c), "line 1: field urlz not found in type natsqueue.Conn")
	assert.ErrorContains(t, decodeStrict("tls: {caFil: x}\n", &c), "line 1: field caFil not found in type tls")

	var cfg Config
	require.NoError(t, decodeStrict("urls: [nats://x]\nstream: S\ntls: {certFile: c, keyFile: k}\n", &cfg), "Config keeps every key")
	assert.Equal(t, "S", cfg.Stream)
	assert.Equal(t, "k", cfg.TLS.KeyFile)
	assert.ErrorContains(t, decodeStrict("tls: {caFil: x}\n", &cfg), "caFil")
}

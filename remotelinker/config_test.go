package remotelinker

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

func decodeConfig(t *testing.T, data string) (Config, error) {
	t.Helper()
	var c Config
	dec := yaml.NewDecoder(strings.NewReader(data))
	dec.KnownFields(true)
	return c, dec.Decode(&c)
}

// TestConfigYAML: the connection keys users know keep loading; the stream keys that remote
// linkers used to accept and ignore are errors that say so.
func TestConfigYAML(t *testing.T) {
	c, err := decodeConfig(t, `
nats:
  urls: [tls://nats:4222]
  tls: {caFile: /etc/nats/ca.crt}
  credentialsFile: /etc/nats/kelemetry.creds
  connectTimeout: 2s
  reconnectWait: 100ms
  maxReconnectWait: 1s
  name: kelemetry-linkers
linkers:
  - {name: volumes, timeout: 3s}
`)
	require.NoError(t, err)
	assert.Equal(t, []string{"tls://nats:4222"}, c.NATS.URLs)
	assert.Equal(t, "/etc/nats/ca.crt", c.NATS.TLS.CAFile)
	assert.Equal(t, "/etc/nats/kelemetry.creds", c.NATS.CredentialsFile)
	assert.Equal(t, 2*time.Second, c.NATS.ConnectTimeout)
	assert.Equal(t, "kelemetry-linkers", c.NATS.Name)
	assert.Equal(t, 3*time.Second, c.Linkers[0].Timeout)

	_, err = decodeConfig(t, "nats:\n  urls: [nats://x]\n  stream: KELEMETRY_AUDIT\n")
	assert.ErrorContains(t, err, "line 3: stream is a setting of the audit queue's stream (audit.queue.nats), not of a NATS connection")
	_, err = decodeConfig(t, "nats:\n  url: nats://x\n")
	assert.ErrorContains(t, err, "field url not found")
}

func TestConfigValidate(t *testing.T) {
	assert.NoError(t, Config{}.Validate(), "no linkers, no NATS needed")
	c := Config{NATS: natsqueueURL("nats://x"), Linkers: []LinkerConfig{{Name: "a"}}}
	assert.NoError(t, c.Validate())
	c.NATS.URLs = nil
	assert.ErrorContains(t, c.Validate(), "nats: urls")
	c = Config{NATS: natsqueueURL("nats://x"), Linkers: []LinkerConfig{{Name: "a"}, {Name: "a"}, {Name: "b.c"}}}
	c.NATS.CredentialsFile, c.NATS.NKeySeedFile = "x", "y"
	err := c.Validate()
	assert.ErrorContains(t, err, `"a": configured twice`)
	assert.ErrorContains(t, err, `name "b.c"`)
	assert.ErrorContains(t, err, "nats: credentialsFile and nkeySeedFile are exclusive")
}

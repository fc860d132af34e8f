package kelemetry

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRemoteLinkersConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
remoteLinkers:
  nats:
    urls: [nats://127.0.0.1:4222]
  linkers:
    - name: podnode
      timeout: 3s
`), 0o600))
	cfg, err := LoadConfig(path)
	require.NoError(t, err)
	require.NoError(t, cfg.Validate())
	require.Len(t, cfg.RemoteLinkers.Linkers, 1)
	assert.Equal(t, 3*time.Second, cfg.RemoteLinkers.Linkers[0].Timeout)
	assert.Equal(t, "kelemetry.link.podnode", cfg.RemoteLinkers.Linkers[0].WithDefaults().Subject)

	cfg.Aggregator.LinkTimeout = 2 * time.Second
	assert.ErrorContains(t, cfg.Validate(), "below the aggregator's linkTimeout")
	cfg.Aggregator.LinkTimeout = 0
	cfg.RemoteLinkers.NATS.URLs = nil
	assert.ErrorContains(t, cfg.Validate(), "urls")
}

// TestRemoteLinkersConfigStreamKeys: remoteLinkers.nats is a connection; the stream keys it used
// to accept and ignore are refused with their line and the keys a connection takes.
func TestRemoteLinkersConfigStreamKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
remoteLinkers:
  nats:
    urls: [nats://127.0.0.1:4222]
    partitions: 8
  linkers:
    - name: podnode
`), 0o600))
	_, err := LoadConfig(path)
	assert.ErrorContains(t, err, "line 5: partitions is a setting of the audit queue's stream (audit.queue.nats), not of a NATS connection, which takes only urls, tls,")
}

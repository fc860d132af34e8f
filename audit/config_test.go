package audit

import (
	"testing"

	"github.com/kelemetry/kelemetry/audit/tap"

	"github.com/kelemetry/kelemetry/audit/webhook"

	"github.com/kelemetry/kelemetry/audit/queue"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConfigQueueBytesFitWebhookBody(t *testing.T) {
	require.NoError(t, Config{}.Validate())
	err := Config{Queue: queue.Config{MaxBytes: 1 << 20}}.Validate()
	require.ErrorContains(t, err, "queue.maxBytes")
	require.NoError(t, Config{Queue: queue.Config{MaxBytes: 1 << 20}, Webhook: webhook.Config{MaxBodyBytes: 1 << 20, MaxInflightBytes: 1 << 20}}.Validate())
}

// The taps' settings are checked with the rest of the audit configuration, each named by its key.
func TestConfigValidatesTaps(t *testing.T) {
	assert.ErrorContains(t, Config{Dump: tap.DumpConfig{Path: "x", MaxFiles: -1}}.Validate(), "maxFiles")
	assert.ErrorContains(t, Config{Forward: []tap.ForwardConfig{{URL: "x"}}}.Validate(), "audit forward[0]")
}

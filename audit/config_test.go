package audit

import (
	"testing"

	"github.com/kelemetry/kelemetry/audit/webhook"

	"github.com/kelemetry/kelemetry/audit/queue"
	"github.com/stretchr/testify/require"
)

func TestConfigQueueBytesFitWebhookBody(t *testing.T) {
	require.NoError(t, Config{}.Validate())
	err := Config{Queue: queue.Config{MaxBytes: 1 << 20}}.Validate()
	require.ErrorContains(t, err, "queue.maxBytes")
	require.NoError(t, Config{Queue: queue.Config{MaxBytes: 1 << 20}, Webhook: webhook.Config{MaxBodyBytes: 1 << 20, MaxInflightBytes: 1 << 20}}.Validate())
}

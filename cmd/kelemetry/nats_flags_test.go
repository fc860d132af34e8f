package main

import (
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseFlagsNATSQueue(t *testing.T) {
	cfg, _, err := parseFlags([]string{"--data-dir", "d", "--audit-queue-nats", "nats://a:4222, nats://b:4222",
		"--audit-queue-nats-member", "1/3"}, io.Discard)
	require.NoError(t, err)
	q := cfg.WithDefaults().Audit.Queue
	assert.Equal(t, []string{"nats://a:4222", "nats://b:4222"}, q.NATS.URLs)
	assert.Equal(t, 1, q.NATS.Member)
	assert.Equal(t, 3, q.NATS.Members)
	assert.True(t, q.IsNATS())
	assert.False(t, q.IsDurable(), "NATS replaces the durable queue in the data folder")
	require.NoError(t, cfg.Validate())

	for _, bad := range []string{"3/3", "x/2", "1", "-1/2"} {
		_, _, err = parseFlags([]string{"--audit-queue-nats", "nats://a:4222", "--audit-queue-nats-member", bad}, io.Discard)
		assert.ErrorContains(t, err, "--audit-queue-nats-member", bad)
	}
	_, _, err = parseFlags([]string{"--audit-queue-nats", "nats://a:4222", "--audit-queue-durable=true"}, io.Discard)
	assert.ErrorContains(t, err, "exclusive", "an explicit durable queue and NATS conflict")
}

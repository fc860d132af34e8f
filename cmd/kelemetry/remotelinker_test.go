package main

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseRemoteLinkerFlags(t *testing.T) {
	cfg, _, err := parseFlags([]string{"--data-dir", "", "--remote-linker", "podnode", "--remote-linker", "other=team.links.other",
		"--remote-linker-nats-url", "nats://127.0.0.1:4222", "--remote-linker-timeout", "2s"}, io.Discard)
	require.NoError(t, err)
	require.Len(t, cfg.RemoteLinkers.Linkers, 2)
	assert.Equal(t, "podnode", cfg.RemoteLinkers.Linkers[0].Name)
	assert.Equal(t, "kelemetry.link.podnode", cfg.RemoteLinkers.Linkers[0].WithDefaults().Subject)
	assert.Equal(t, "team.links.other", cfg.RemoteLinkers.Linkers[1].Subject)
	assert.Equal(t, 2*time.Second, cfg.RemoteLinkers.Linkers[1].Timeout)
	assert.Equal(t, []string{"nats://127.0.0.1:4222"}, cfg.RemoteLinkers.NATS.URLs)

	_, _, err = parseFlags([]string{"--data-dir", "", "--remote-linker", "podnode"}, io.Discard)
	assert.ErrorContains(t, err, "urls", "a remote linker needs NATS")
	_, _, err = parseFlags([]string{"--data-dir", "", "--remote-linker", "a.b", "--remote-linker-nats-url", "nats://x:1"}, io.Discard)
	assert.Error(t, err, "a name is one subject token")
}

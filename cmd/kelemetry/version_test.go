package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/internal/healthz"
	"github.com/kelemetry/kelemetry/internal/version"
)

// --version prints the build and exits without starting anything.
func TestVersionFlag(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"--version"}, &out, io.Discard))
	line := strings.TrimSpace(out.String())
	assert.Equal(t, version.Get().String(), line)
	assert.True(t, strings.HasPrefix(line, "kelemetry "), line)
}

// /healthz names the running build, so that a rollout can be checked through the probe port.
func TestHealthzShowsVersion(t *testing.T) {
	r := start(t, testConfig(t, ""))
	var h healthz.Body
	require.Equal(t, http.StatusOK, getJSON(t, r.api("/healthz"), &h))
	assert.Equal(t, version.Get().Version, h.Version)
	assert.Equal(t, version.Get().Commit, h.Commit)
	assert.NotEmpty(t, h.Version)
}

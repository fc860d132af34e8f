package httpserver

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStartServeStop(t *testing.T) {
	ctx := context.Background()
	s := NewServer("test", "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "hi")
	}), nil)
	require.NoError(t, s.Stop(ctx), "stop before start is a no-op")
	require.NoError(t, s.Start(ctx))
	resp, err := http.Get("http://" + s.Addr())
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "hi", string(body))

	// A busy port fails start-up with a clear error.
	busy := NewServer("other", s.Addr(), http.NotFoundHandler(), nil)
	err = busy.Start(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "other server: listen on "+s.Addr())

	require.NoError(t, s.Stop(ctx))
	resp, err = http.Get("http://" + s.Addr())
	if err == nil {
		resp.Body.Close()
	}
	assert.Error(t, err, "stopped")
}

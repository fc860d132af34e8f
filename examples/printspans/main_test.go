package main

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/goleak"

	"github.com/kelemetry/kelemetry/httpserver"
	"github.com/kelemetry/kelemetry/internal/logtest"
)

// TestMain fails the package's tests when a goroutine outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestValidate(t *testing.T) {
	require.NoError(t, fx.ValidateApp(options(io.Discard, "127.0.0.1:0", "c", slog.Default())))
}

// TestWebhookToPrinter posts the recorded rollout's webhook batches and reads the printed spans:
// the composed binary receives audit events and turns them into spans without any store.
func TestWebhookToPrinter(t *testing.T) {
	var out logtest.Buffer
	var servers *httpserver.Servers
	app := fxtest.New(t, options(&out, "127.0.0.1:0", "demo", slog.New(slog.DiscardHandler)), fx.Populate(&servers))
	app.RequireStart()
	defer app.RequireStop()

	assert.Empty(t, servers.APIAddr(), "no API listener: nothing was registered on it")
	require.NotEmpty(t, servers.AuditAddr())

	f, err := os.Open(filepath.Join("..", "..", "testdata", "rollout", "webhook-batches.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	batches := 0
	for sc.Scan() {
		resp, err := http.Post("http://"+servers.AuditAddr()+"/audit/demo", "application/json", bytes.NewReader(sc.Bytes()))
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		batches++
	}
	require.NoError(t, sc.Err())
	require.Positive(t, batches)

	want := []string{
		`object demo/apps/deployments/default/demo "deployments/demo"`,
		`event  demo/apps/deployments/default/demo "admin create"`,
		`event  demo//pods/default/demo-`,
	}
	require.Eventually(t, func() bool {
		s := out.String()
		for _, w := range want {
			if !strings.Contains(s, w) {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "printed:\n%s", out.String())
}

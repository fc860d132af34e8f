package auditlog

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/internal/logtest"
	"github.com/kelemetry/kelemetry/telemetry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLogReplayDropsBadTimestamps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	bad := strings.Replace(logLine("y9999"), `"stageTimestamp":"2026-11-29T17:09:30.005000Z"`, `"stageTimestamp":"9999-01-01T00:00:00Z"`, 1)
	future := time.Now().UTC().Add(720 * time.Hour).Format(time.RFC3339Nano)
	fut := strings.Replace(logLine("future"), `"requestReceivedTimestamp":"2026-11-29T17:09:30.000000Z"`, `"requestReceivedTimestamp":"`+future+`"`, 1)
	require.NotEqual(t, logLine("y9999"), bad)
	require.NoError(t, os.WriteFile(path, []byte(logLine("a")+bad+fut+logLine("b")), 0o600))
	var c collector
	var buf logtest.Buffer
	stats, err := ReplayFile(t.Context(), path, "kind", &c, telemetry.Settings{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, c.IDs())
	assert.Equal(t, int64(4), stats.Lines)
	assert.Equal(t, int64(2), stats.Events)
	assert.Equal(t, int64(2), stats.DroppedEvents)
	assert.Equal(t, int64(0), stats.BadLines)
	logs := buf.String()
	assert.Contains(t, logs, "line 2: stageTimestamp: 9999-01-01T00:00:00Z is more than 292 years ahead of this receiver's clock (audit.maxFutureSkew 24h)")
	assert.Contains(t, logs, "line 3: requestReceivedTimestamp: "+future)
}

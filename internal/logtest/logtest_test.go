package logtest

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRecorderCountsByLevel(t *testing.T) {
	rec := &Recorder{}
	logger := slog.New(rec).With("component", "test")
	logger.Info("a")
	logger.Warn("b", "k", "v")
	logger.Warn("c")
	assert.Equal(t, 1, rec.Count(slog.LevelInfo))
	assert.Equal(t, 2, rec.Count(slog.LevelWarn))
	assert.Equal(t, 0, rec.Count(slog.LevelError))
	records := rec.Records()
	if assert.Len(t, records, 3) {
		assert.Equal(t, "b", records[1].Message)
	}
}

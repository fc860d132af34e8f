package queue

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A segment file's Sync is syncData: it succeeds on an open file, and a closed one gets an error,
// which the log treats as a failed sync, rather than a panic.
func TestSegmentFileSyncsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "1.seg")
	f, err := createSegFile(path)
	require.NoError(t, err)
	require.IsType(t, dataSyncFile{}, f)
	_, err = f.Write([]byte("record"))
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "record", string(got))
	require.NoError(t, f.Close())
	err = f.Sync()
	require.Error(t, err)
	assert.Contains(t, err.Error(), path)
}

package version

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Values stamped with -ldflags -X win over the build information.
func TestResolvePrefersStampedValues(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.9.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "aaaa"}, {Key: "vcs.modified", Value: "true"}}}
	got := resolve("v1.2.3", "0123456789abcdef", info, true)
	assert.Equal(t, Info{Version: "v1.2.3", Commit: "0123456789abcdef", GoVersion: "go1.26.8"}, got)
	assert.Equal(t, "kelemetry v1.2.3 (commit 0123456789abcdef, go1.26.8)", got.String())
}

// Without stamps, the module version and the VCS revision of the build information are used
// (go install module@version, or go build inside a git checkout with -buildvcs).
func TestResolveFallsBackToBuildInfo(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.9.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abcdef"}, {Key: "vcs.modified", Value: "true"}}}
	got := resolve("", "", info, true)
	assert.Equal(t, Info{Version: "v0.9.0", Commit: "abcdef", Modified: true, GoVersion: "go1.26.8"}, got)
	assert.Equal(t, "kelemetry v0.9.0 (commit abcdef, modified, go1.26.8)", got.String())
}

// Nothing known: "devel" and "unknown", never empty strings.
func TestResolveUnknown(t *testing.T) {
	got := resolve("", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true)
	assert.Equal(t, "devel", got.Version)
	assert.Equal(t, "unknown", got.Commit)
	got = resolve("", "", nil, false)
	assert.Equal(t, Info{Version: "devel", Commit: "unknown"}, got)
	assert.Equal(t, "kelemetry devel (commit unknown)", got.String())
}

// Get reads the package variables.
func TestGetUsesVariables(t *testing.T) {
	oldV, oldC := Version, Commit
	t.Cleanup(func() { Version, Commit = oldV, oldC })
	Version, Commit = "v9.9.9", "feed"
	assert.Equal(t, "v9.9.9", Get().Version)
	assert.Equal(t, "feed", Get().Commit)
}

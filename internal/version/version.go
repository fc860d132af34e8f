// Package version tells which build of Kelemetry is running: the version and commit stamped at
// link time, or else what the Go toolchain recorded in the binary.
//
// Stamp a build with
//
//	go build -ldflags "-X github.com/kelemetry/kelemetry/internal/version.Version=v1.2.3 \
//	  -X github.com/kelemetry/kelemetry/internal/version.Commit=$(git rev-parse HEAD)" ./cmd/kelemetry
package version

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// Version and Commit are set at link time with -ldflags -X (see the package documentation).
// Empty, Get falls back to the module version and VCS revision of the build information.
var (
	Version = ""
	Commit  = ""
)

// Info describes a build.
type Info struct {
	// Version is the release ("v1.2.3"), or "devel" when unknown.
	Version string `json:"version"`
	// Commit is the VCS revision, or "unknown".
	Commit string `json:"commit"`
	// Modified is true when the build information says the working tree had local changes.
	Modified bool `json:"modified,omitempty"`
	// GoVersion is the toolchain that built the binary.
	GoVersion string `json:"goVersion,omitempty"`
}

// Get returns the running binary's build.
func Get() Info {
	info, ok := debug.ReadBuildInfo()
	return resolve(Version, Commit, info, ok)
}

// String is the one line that --version prints.
func (i Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "kelemetry %s (commit %s", i.Version, i.Commit)
	if i.Modified {
		b.WriteString(", modified")
	}
	if i.GoVersion != "" {
		b.WriteString(", " + i.GoVersion)
	}
	b.WriteString(")")
	return b.String()
}

func resolve(version, commit string, info *debug.BuildInfo, ok bool) Info {
	out := Info{Version: version, Commit: commit}
	if ok && info != nil {
		out.GoVersion = info.GoVersion
		if out.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			out.Version = info.Main.Version
		}
		if commit == "" {
			for _, s := range info.Settings {
				switch s.Key {
				case "vcs.revision":
					out.Commit = s.Value
				case "vcs.modified":
					out.Modified = s.Value == "true"
				}
			}
		}
	}
	if out.Version == "" {
		out.Version = "devel"
	}
	if out.Commit == "" {
		out.Commit = "unknown"
	}
	return out
}

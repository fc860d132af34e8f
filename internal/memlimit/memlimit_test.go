package memlimit

import (
	"errors"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/internal/logtest"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Setting
	}{
		{"", Setting{Percent: DefaultPercent}},
		{"off", Setting{Off: true}},
		{"OFF", Setting{Off: true}},
		{"0", Setting{Off: true}},
		{"90%", Setting{Percent: 90}},
		{" 100 % ", Setting{Percent: 100}},
		{"1700MiB", Setting{Bytes: 1700 << 20}},
		{"1.5Gi", Setting{Bytes: 3 << 29}},
		{"2GiB", Setting{Bytes: 2 << 30}},
		{"512Ki", Setting{Bytes: 512 << 10}},
		{"1073741824", Setting{Bytes: 1 << 30}},
		{"4096B", Setting{Bytes: 4096}},
	} {
		got, err := Parse(tc.in)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
	for _, bad := range []string{"0%", "101%", "-5%", "x%", "-1", "1.5", "0.5B", "2GB", "lots", "1e30GiB", "NaN"} {
		_, err := Parse(bad)
		assert.Error(t, err, bad)
	}
	_, err := Parse("2GB")
	assert.ErrorContains(t, err, `memory limit "2GB"`, "the error names the value")
}

func TestSettingString(t *testing.T) {
	for _, in := range []string{"off", "85%", "1073741824", "12.5%"} {
		s, err := Parse(in)
		require.NoError(t, err)
		assert.Equal(t, in, s.String())
	}
}

// This machine's layout: cgroup v1, the memory controller mounted at /sys/fs/cgroup/memory with
// the whole hierarchy visible, the process in /process_api/abc, the unified hierarchy mounted
// beside it without the memory controller.
const v1Mountinfo = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`

const v1Cgroup = `9:name=systemd:/
8:pids:/
4:memory:/process_api/abc
1:cpu:/
0::/
`

const v1Unlimited = "9223372036854771712\n"

func file(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }

func TestContainerLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files fstest.MapFS
		want  Container
	}{
		{
			name: "cgroup v1",
			files: fstest.MapFS{
				"proc/self/cgroup":                                           file(v1Cgroup),
				"proc/self/mountinfo":                                        file(v1Mountinfo),
				"sys/fs/cgroup/memory/memory.limit_in_bytes":                 file(v1Unlimited),
				"sys/fs/cgroup/memory/process_api/memory.limit_in_bytes":     file(v1Unlimited),
				"sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes": file("2147483648\n"),
			},
			want: Container{Bytes: 2 << 30, Source: "/sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes"},
		},
		{
			name: "cgroup v1, a lower limit above",
			files: fstest.MapFS{
				"proc/self/cgroup":    file(v1Cgroup),
				"proc/self/mountinfo": file(v1Mountinfo),
				"sys/fs/cgroup/memory/process_api/memory.limit_in_bytes":     file("1073741824\n"),
				"sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes": file(v1Unlimited),
			},
			want: Container{Bytes: 1 << 30, Source: "/sys/fs/cgroup/memory/process_api/memory.limit_in_bytes"},
		},
		{
			name: "cgroup v1, hierarchical_memory_limit",
			files: fstest.MapFS{
				"proc/self/cgroup":    file(v1Cgroup),
				"proc/self/mountinfo": file(v1Mountinfo),
				"sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes": file(v1Unlimited),
				"sys/fs/cgroup/memory/process_api/abc/memory.stat":           file("cache 0\nrss 0\nhierarchical_memory_limit 536870912\n"),
			},
			want: Container{Bytes: 512 << 20, Source: "/sys/fs/cgroup/memory/process_api/abc/memory.stat (hierarchical_memory_limit)"},
		},
		{
			name: "cgroup v1, unlimited",
			files: fstest.MapFS{
				"proc/self/cgroup":    file(v1Cgroup),
				"proc/self/mountinfo": file(v1Mountinfo),
				"sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes": file(v1Unlimited),
				"sys/fs/cgroup/memory/process_api/abc/memory.stat":           file("hierarchical_memory_limit 9223372036854771712\n"),
			},
		},
		{
			name: "cgroup v1 in a container without a cgroup namespace: the mount's root is the container's cgroup",
			files: fstest.MapFS{
				"proc/self/cgroup":                           file("4:memory:/docker/0123\n"),
				"proc/self/mountinfo":                        file("35 31 0:32 /docker/0123 /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory\n"),
				"sys/fs/cgroup/memory/memory.limit_in_bytes": file("805306368\n"),
			},
			want: Container{Bytes: 768 << 20, Source: "/sys/fs/cgroup/memory/memory.limit_in_bytes"},
		},
		{
			name: "cgroup v2 with a cgroup namespace (Kubernetes)",
			files: fstest.MapFS{
				"proc/self/cgroup":               file("0::/\n"),
				"proc/self/mountinfo":            file("30 24 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate\n"),
				"sys/fs/cgroup/memory.max":       file("2147483648\n"),
				"sys/fs/cgroup/cgroup.procs":     file("1\n"),
				"sys/fs/cgroup/memory.swap.max":  file("0\n"),
				"sys/fs/cgroup/memory.high":      file("max\n"),
				"sys/fs/cgroup/memory.min":       file("0\n"),
				"sys/fs/cgroup/cgroup.subtree_c": file(""),
			},
			want: Container{Bytes: 2 << 30, Source: "/sys/fs/cgroup/memory.max"},
		},
		{
			name: "cgroup v2 without a namespace: the pod's limit above the container's",
			files: fstest.MapFS{
				"proc/self/cgroup":                           file("0::/kubepods/pod1/ctr\n"),
				"proc/self/mountinfo":                        file("30 24 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"),
				"sys/fs/cgroup/kubepods/memory.max":          file("max\n"),
				"sys/fs/cgroup/kubepods/pod1/memory.max":     file("1073741824\n"),
				"sys/fs/cgroup/kubepods/pod1/ctr/memory.max": file("max\n"),
			},
			want: Container{Bytes: 1 << 30, Source: "/sys/fs/cgroup/kubepods/pod1/memory.max"},
		},
		{
			name: "cgroup v2, max everywhere",
			files: fstest.MapFS{
				"proc/self/cgroup":                    file("0::/user.slice\n"),
				"proc/self/mountinfo":                 file("30 24 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"),
				"sys/fs/cgroup/user.slice/memory.max": file("max\n"),
			},
		},
		{
			name: "a mount point with a space",
			files: fstest.MapFS{
				"proc/self/cgroup":              file("0::/a\n"),
				"proc/self/mountinfo":           file(`30 24 0:26 / /sys/fs/cgroup\040v2 rw - cgroup2 cgroup2 rw` + "\n"),
				"sys/fs/cgroup v2/a/memory.max": file("1048576\n"),
			},
			want: Container{Bytes: 1 << 20, Source: "/sys/fs/cgroup v2/a/memory.max"},
		},
		{name: "no /proc (not Linux)", files: fstest.MapFS{}},
		{
			name: "no memory controller",
			files: fstest.MapFS{
				"proc/self/cgroup":    file("1:cpu:/\n"),
				"proc/self/mountinfo": file("32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"),
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ContainerLimit(tc.files)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestContainerLimitMalformed(t *testing.T) {
	_, err := ContainerLimit(fstest.MapFS{
		"proc/self/cgroup":         file("0::/\n"),
		"proc/self/mountinfo":      file("30 24 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"),
		"sys/fs/cgroup/memory.max": file("two gigabytes\n"),
	})
	assert.ErrorContains(t, err, "/sys/fs/cgroup/memory.max")
}

// The real files of the machine the tests run on are read without error (whatever they say).
func TestContainerLimitOfThisMachine(t *testing.T) {
	c, err := ContainerLimit(os.DirFS("/"))
	require.NoError(t, err)
	t.Logf("container memory limit: %d bytes from %q", c.Bytes, c.Source)
	if c.Bytes > 0 {
		assert.True(t, strings.HasPrefix(c.Source, "/sys/fs/cgroup"), c.Source)
	}
}

func TestResolve(t *testing.T) {
	twoGiB := func() (Container, error) { return Container{Bytes: 2 << 30, Source: "/sys/fs/cgroup/memory.max"}, nil }
	none := func() (Container, error) { return Container{}, nil }
	unreadable := func() (Container, error) { return Container{}, errors.New("boom") }
	mustParse := func(s string) Setting {
		st, err := Parse(s)
		require.NoError(t, err)
		return st
	}

	d, err := Resolve(mustParse(""), "", twoGiB)
	require.NoError(t, err)
	assert.Equal(t, int64(2<<30)*85/100, d.Limit, "85% of the container's limit by default")
	assert.Equal(t, "85% of the container's memory limit (/sys/fs/cgroup/memory.max)", d.Reason)

	d, err = Resolve(mustParse("50%"), "", twoGiB)
	require.NoError(t, err)
	assert.Equal(t, int64(1<<30), d.Limit)

	d, err = Resolve(mustParse("1700MiB"), "", unreadable)
	require.NoError(t, err, "a size needs no container")
	assert.Equal(t, int64(1700<<20), d.Limit)

	d, err = Resolve(mustParse("off"), "", twoGiB)
	require.NoError(t, err)
	assert.Zero(t, d.Limit)
	assert.Equal(t, "memoryLimit off", d.Reason)

	d, err = Resolve(mustParse("1700MiB"), "1GiB", twoGiB)
	require.NoError(t, err)
	assert.Zero(t, d.Limit, "GOMEMLIMIT in the environment wins over any setting")
	assert.Equal(t, "GOMEMLIMIT=1GiB from the environment", d.Reason)

	d, err = Resolve(mustParse(""), "", none)
	require.NoError(t, err)
	assert.Zero(t, d.Limit)
	assert.Equal(t, "no container memory limit found", d.Reason)

	d, err = Resolve(mustParse(""), "", unreadable)
	require.Error(t, err)
	assert.Zero(t, d.Limit)
}

// restoreLimit puts the test binary's memory limit back after a test changed it.
func restoreLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
}

func TestApply(t *testing.T) {
	restoreLimit(t)
	debug.SetMemoryLimit(math.MaxInt64)
	fsys := fstest.MapFS{
		"proc/self/cgroup":         file("0::/\n"),
		"proc/self/mountinfo":      file("30 24 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"),
		"sys/fs/cgroup/memory.max": file("1073741824\n"),
	}
	noEnv := func(string) string { return "" }
	rec := &logtest.Recorder{}
	got := Apply(slog.New(rec), Setting{Percent: 85}, noEnv, fsys)
	want := int64(1<<30) * 85 / 100
	assert.Equal(t, want, got)
	assert.Equal(t, want, debug.SetMemoryLimit(-1), "the runtime's limit is set")
	records := rec.Records()
	require.Len(t, records, 1, "one line at start")
	assert.Equal(t, slog.LevelInfo, records[0].Level)
	assert.Equal(t, "memory limit: GOMEMLIMIT 870 MiB", records[0].Message)
	attrs := map[string]string{}
	records[0].Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
	assert.Equal(t, "85% of the container's memory limit (/sys/fs/cgroup/memory.max)", attrs["reason"])
	assert.Equal(t, "1073741824", attrs["containerLimit"])

	// GOMEMLIMIT in the environment: the runtime's own limit is left alone.
	debug.SetMemoryLimit(512 << 20)
	rec = &logtest.Recorder{}
	got = Apply(slog.New(rec), Setting{Percent: 85}, func(k string) string {
		if k == "GOMEMLIMIT" {
			return "512MiB"
		}
		return ""
	}, fsys)
	assert.Equal(t, int64(512<<20), got)
	require.Len(t, rec.Records(), 1)
	assert.Equal(t, "memory limit: GOMEMLIMIT 512 MiB", rec.Records()[0].Message)

	// No limit anywhere: none set, said once.
	debug.SetMemoryLimit(math.MaxInt64)
	rec = &logtest.Recorder{}
	got = Apply(slog.New(rec), Setting{Percent: 85}, noEnv, fstest.MapFS{})
	assert.Zero(t, got)
	require.Len(t, rec.Records(), 1)
	assert.Equal(t, "memory limit: none set", rec.Records()[0].Message)

	// Unreadable cgroup files: a warning, nothing set.
	rec = &logtest.Recorder{}
	got = Apply(slog.New(rec), Setting{Percent: 85}, noEnv, fstest.MapFS{
		"proc/self/cgroup":         file("0::/\n"),
		"proc/self/mountinfo":      file("30 24 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"),
		"sys/fs/cgroup/memory.max": file("lots\n"),
	})
	assert.Zero(t, got)
	require.Len(t, rec.Records(), 1)
	assert.Equal(t, slog.LevelWarn, rec.Records()[0].Level)
}

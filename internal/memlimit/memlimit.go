// Package memlimit sets the Go runtime's soft memory limit (GOMEMLIMIT) from the memory limit of
// the process's container (cgroup v2 memory.max, cgroup v1 memory.limit_in_bytes) or from a
// configured size, so that the garbage collector collects harder as the heap nears the limit
// instead of leaving garbage for the kernel's OOM killer.
package memlimit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"path"
	"runtime/debug"
	"strconv"
	"strings"
)

// DefaultPercent is the share of the container's memory limit that the Go memory limit is set to
// by default. The rest is for memory the Go runtime does not count (the binary, cgo allocations
// such as Pebble's block cache when built with cgo, the kernel's accounting of the process) and
// for the runtime overshooting a soft limit.
const DefaultPercent = 85

// Setting is a parsed memory limit setting (see Parse).
type Setting struct {
	// Off leaves the Go runtime's memory limit as it is.
	Off bool
	// Bytes is an absolute limit; 0 means Percent of the container's limit.
	Bytes int64
	// Percent is the share of the container's limit, in (0, 100].
	Percent float64
}

// Parse reads a memory limit setting: "" is DefaultPercent of the container's limit; "N%"
// another share of it (0 < N <= 100); "off" or "0" none; otherwise a size in bytes with an
// optional binary unit, as GOMEMLIMIT or Kubernetes write it: "1700MiB", "1.5Gi", "2GiB",
// "1073741824".
func Parse(s string) (Setting, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return Setting{Percent: DefaultPercent}, nil
	case s == "0" || strings.EqualFold(s, "off"):
		return Setting{Off: true}, nil
	case strings.HasSuffix(s, "%"):
		p, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(s, "%")), 64)
		if err != nil || !(p > 0 && p <= 100) {
			return Setting{}, fmt.Errorf("memory limit %q: want a share of the container's limit above 0%% and at most 100%%", s)
		}
		return Setting{Percent: p}, nil
	}
	n, err := parseSize(s)
	if err != nil {
		return Setting{}, fmt.Errorf("memory limit %q: %w", s, err)
	}
	return Setting{Bytes: n}, nil
}

// units are the size suffixes Parse accepts, longest first.
var units = []struct {
	suffix string
	shift  uint
}{
	{"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40},
	{"Ki", 10}, {"Mi", 20}, {"Gi", 30}, {"Ti", 40},
	{"B", 0},
}

func parseSize(s string) (int64, error) {
	num, shift := s, uint(0)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			num, shift = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.shift
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(v) || v <= 0 {
		return 0, errors.New(`want "off", "N%" or a size such as 1700MiB, 2Gi or 1073741824`)
	}
	if shift == 0 && v != math.Trunc(v) {
		return 0, errors.New("a number of bytes is whole")
	}
	b := v * float64(uint64(1)<<shift)
	if b >= math.MaxInt64 {
		return 0, errors.New("too large")
	}
	if b < 1 {
		return 0, errors.New("less than a byte")
	}
	return int64(b), nil
}

// String writes the setting as Parse reads it.
func (s Setting) String() string {
	switch {
	case s.Off:
		return "off"
	case s.Bytes > 0:
		return strconv.FormatInt(s.Bytes, 10)
	default:
		return strconv.FormatFloat(s.Percent, 'g', -1, 64) + "%"
	}
}

// Container is the memory limit of the process's container.
type Container struct {
	// Bytes is the lowest limit of the process's cgroup and the cgroups above it; 0 when there
	// is none (no cgroup memory controller, or unlimited).
	Bytes int64
	// Source is the file that holds it, e.g. "/sys/fs/cgroup/memory.max".
	Source string
}

// unlimited is where limit values mean "no limit": cgroup v1 writes 2^63-1 rounded down to a
// page; no container has 4 EiB.
const unlimited = int64(1) << 62

// ContainerLimit reads the memory limit of the process's cgroup from fsys, the root of the file
// system (os.DirFS("/")): the cgroup named for the memory controller in /proc/self/cgroup (or the
// unified cgroup v2 one), found under its mount point in /proc/self/mountinfo, and the cgroups
// above it up to the mount point, which limit it too. cgroup v1 reads memory.limit_in_bytes (and
// memory.stat's hierarchical_memory_limit), cgroup v2 memory.max. Without cgroup files (not
// Linux, no /proc) it answers no limit and no error.
func ContainerLimit(fsys fs.FS) (Container, error) {
	cgroups, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if errors.Is(err, fs.ErrNotExist) {
		return Container{}, nil
	}
	if err != nil {
		return Container{}, fmt.Errorf("read /proc/self/cgroup: %w", err)
	}
	mountinfo, err := fs.ReadFile(fsys, "proc/self/mountinfo")
	if errors.Is(err, fs.ErrNotExist) {
		return Container{}, nil
	}
	if err != nil {
		return Container{}, fmt.Errorf("read /proc/self/mountinfo: %w", err)
	}
	v1, v2, hasV1, hasV2 := ownCgroups(cgroups)
	mounts := parseMountinfo(mountinfo)
	if hasV1 {
		for _, m := range mounts {
			if m.fstype == "cgroup" && hasOption(m.superOptions, "memory") {
				return walkUp(fsys, m, v1, v1Limit)
			}
		}
	}
	if hasV2 {
		for _, m := range mounts {
			if m.fstype == "cgroup2" {
				return walkUp(fsys, m, v2, v2Limit)
			}
		}
	}
	return Container{}, nil
}

// ownCgroups reads /proc/self/cgroup: the path of the v1 memory controller's cgroup and of the
// unified (v2) one.
func ownCgroups(data []byte) (v1, v2 string, hasV1, hasV2 bool) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		id, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		controllers, p, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		switch {
		case id == "0" && controllers == "":
			v2, hasV2 = p, true
		case hasOption(controllers, "memory"):
			v1, hasV1 = p, true
		}
	}
	return v1, v2, hasV1, hasV2
}

func hasOption(list, name string) bool {
	for _, o := range strings.Split(list, ",") {
		if o == name {
			return true
		}
	}
	return false
}

type mount struct {
	root, point          string
	fstype, superOptions string
}

// parseMountinfo reads the lines of /proc/self/mountinfo (see proc(5)).
func parseMountinfo(data []byte) []mount {
	var out []mount
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		sep := -1
		for i, x := range f {
			if x == "-" && i >= 6 {
				sep = i
				break
			}
		}
		if sep < 0 || len(f) < sep+4 {
			continue
		}
		out = append(out, mount{root: unescape(f[3]), point: unescape(f[4]), fstype: f[sep+1], superOptions: f[sep+3]})
	}
	return out
}

// unescape decodes the octal escapes (\040 for a space) of mountinfo's paths.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// limitReader reads the limit of one cgroup directory: the bytes (0: none), the file, and
// whether a limit file was there at all.
type limitReader func(fsys fs.FS, dir string) (limit int64, file string, err error)

// walkUp finds the lowest limit of the cgroup at cgroupPath and the cgroups above it, within the
// mount m.
func walkUp(fsys fs.FS, m mount, cgroupPath string, read limitReader) (Container, error) {
	cg, root := path.Clean("/"+cgroupPath), path.Clean("/"+m.root)
	rel := "/"
	switch {
	case root == "/":
		rel = cg
	case cg == root || strings.HasPrefix(cg, root+"/"):
		rel = cg[len(root):]
	default:
		// The mount shows another part of the hierarchy (a cgroup namespace): its top is the
		// process's cgroup.
	}
	top := fsPath(m.point)
	dir := fsPath(path.Join(m.point, rel))
	if _, err := fs.Stat(fsys, dir); err != nil {
		dir = top
	}
	var best Container
	for {
		limit, file, err := read(fsys, dir)
		if err != nil {
			return Container{}, err
		}
		if limit > 0 && (best.Bytes == 0 || limit < best.Bytes) {
			best = Container{Bytes: limit, Source: "/" + file}
		}
		if dir == top || dir == "." {
			return best, nil
		}
		dir = path.Dir(dir)
	}
}

// fsPath is an absolute path as fs.FS names it.
func fsPath(p string) string {
	p = strings.TrimPrefix(path.Clean(p), "/")
	if p == "" {
		return "."
	}
	return p
}

// readLimitFile reads a limit file: a number of bytes, or "max"; 0 when unlimited or absent.
func readLimitFile(fsys fs.FS, file string) (int64, error) {
	data, err := fs.ReadFile(fsys, file)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read /%s: %w", file, err)
	}
	s := strings.TrimSpace(string(data))
	if s == "max" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		if ne := (*strconv.NumError)(nil); errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return 0, nil // past int64: unlimited
		}
		return 0, fmt.Errorf("read /%s: %q is not a number of bytes", file, s)
	}
	if n <= 0 || n >= unlimited {
		return 0, nil
	}
	return n, nil
}

// v2Limit reads memory.max.
func v2Limit(fsys fs.FS, dir string) (int64, string, error) {
	file := path.Join(dir, "memory.max")
	n, err := readLimitFile(fsys, file)
	return n, file, err
}

// v1Limit reads memory.limit_in_bytes, and memory.stat's hierarchical_memory_limit (the lowest
// limit of the cgroup and those above it, including those above the mount's view) when lower.
func v1Limit(fsys fs.FS, dir string) (int64, string, error) {
	file := path.Join(dir, "memory.limit_in_bytes")
	n, err := readLimitFile(fsys, file)
	if err != nil {
		return 0, "", err
	}
	stat := path.Join(dir, "memory.stat")
	data, err := fs.ReadFile(fsys, stat)
	if err != nil {
		return n, file, nil //nolint:nilerr // memory.stat is optional
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok || k != "hierarchical_memory_limit" {
			continue
		}
		h, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err == nil && h > 0 && h < unlimited && (n == 0 || h < n) {
			return h, stat + " (hierarchical_memory_limit)", nil
		}
	}
	return n, file, nil
}

// Decision is the Go memory limit Resolve chose.
type Decision struct {
	// Limit is the limit to set, in bytes; 0 leaves the runtime's limit as it is.
	Limit int64
	// Reason says where the limit comes from, or why none is set.
	Reason string
	// Container is the container's limit, when it was read.
	Container Container
}

// Resolve decides the Go memory limit: env is the GOMEMLIMIT environment variable, which wins
// when set (the runtime applied it at start); then the setting: off, a size, or a share of the
// container's limit (container reads it).
func Resolve(s Setting, env string, container func() (Container, error)) (Decision, error) {
	switch {
	case env != "":
		return Decision{Reason: "GOMEMLIMIT=" + env + " from the environment"}, nil
	case s.Off:
		return Decision{Reason: "memoryLimit off"}, nil
	case s.Bytes > 0:
		return Decision{Limit: s.Bytes, Reason: "memoryLimit " + strconv.FormatInt(s.Bytes, 10)}, nil
	}
	c, err := container()
	if err != nil {
		return Decision{Reason: "the container's memory limit could not be read"}, err
	}
	if c.Bytes == 0 {
		return Decision{Reason: "no container memory limit found"}, nil
	}
	return Decision{
		Limit:     int64(float64(c.Bytes) * s.Percent / 100),
		Reason:    fmt.Sprintf("%s of the container's memory limit (%s)", s, c.Source),
		Container: c,
	}, nil
}

// Apply sets the Go runtime's memory limit as s says (Resolve with the process's GOMEMLIMIT and
// its cgroup) and logs once, at info level, what it set and why (a warning when the cgroup could
// not be read). It returns the limit in effect afterwards, 0 when none.
func Apply(logger *slog.Logger, s Setting, getenv func(string) string, fsys fs.FS) int64 {
	d, err := Resolve(s, getenv("GOMEMLIMIT"), func() (Container, error) { return ContainerLimit(fsys) })
	if d.Limit > 0 {
		debug.SetMemoryLimit(d.Limit)
	}
	effective := debug.SetMemoryLimit(-1)
	if effective == math.MaxInt64 {
		effective = 0
	}
	attrs := []any{"gomemlimit", effective, "reason", d.Reason}
	if d.Container.Bytes > 0 {
		attrs = append(attrs, "containerLimit", d.Container.Bytes)
	}
	switch {
	case err != nil:
		logger.Warn("memory limit: none set", append(attrs, "error", err)...)
	case effective == 0:
		logger.Info("memory limit: none set", attrs...)
	default:
		logger.Info(fmt.Sprintf("memory limit: GOMEMLIMIT %d MiB", effective>>20), attrs...)
	}
	return effective
}

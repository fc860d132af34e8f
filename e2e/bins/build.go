package bins

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// builderVersion changes whenever the way the control plane is built changes, so that a cache
// made by an older builder is rebuilt.
const builderVersion = "2"

// JaegerPackage is the Jaeger v2 main package, pinned by the tool module tools/jaeger.
const JaegerPackage = "github.com/jaegertracing/jaeger/cmd/jaeger"

// Stamp files in the cache folder: the key of what the binaries were built from.
const (
	controlPlaneStamp = "control-plane.stamp"
	jaegerStamp       = "jaeger.stamp"
)

// tool is a binary built from a nested tool module (tools/<Dir>, whose go.mod pins it) with a
// stamp of its own: adding or bumping a tool never rebuilds the control plane or another tool.
type tool struct {
	name, dir, pkg, ldflags string
	// builder changes whenever the way the tool is built changes.
	builder string
	stamp   string
	// cold says how long a cold build takes, for the log.
	cold string
	// builderConfig, when set, names a Collector builder configuration in the tool module's
	// folder: pkg is then the builder, which generates the distribution that configuration
	// describes and builds it (the configuration is part of the stamp).
	builderConfig string
}

// tools are built from their tool modules. Jaeger's stamp key is the one caches made before the
// other tools were added hold (TestToolStampKeys).
var tools = []tool{
	// -s -w strip the symbol tables (Jaeger's binary is 116 MiB otherwise).
	{name: Jaeger, dir: "jaeger", pkg: JaegerPackage, ldflags: "-s -w", builder: "1", stamp: jaegerStamp,
		cold: "about 13 minutes and 2.3 GB of memory on 2 cores"},
	{name: Promtool, dir: "promtool", pkg: PromtoolPackage, ldflags: "-s -w", builder: "1", stamp: "promtool.stamp",
		cold: "about 4 minutes on 2 cores"},
	{name: Helm, dir: "helm", pkg: HelmPackage, ldflags: "-s -w", builder: "1", stamp: "helm.stamp",
		cold: "about 2 minutes on 2 cores"},
	{name: OtelCol, dir: "otelcol", pkg: CollectorBuilderPackage, ldflags: "-s -w", builder: "1", stamp: "otelcol.stamp",
		builderConfig: "builder-config.yaml", cold: "about 1.5 minutes on 2 cores"},
}

// KubernetesVersion is the k8s.io/kubernetes release built (it must match e2e/go.mod).
const KubernetesVersion = "v1.37.2"

// controlPlanePackages are built from the e2e module, whose go.mod pins kubernetes.
var controlPlanePackages = []string{
	"k8s.io/kubernetes/cmd/" + KubeAPIServer,
	"k8s.io/kubernetes/cmd/" + KubeControllerManager,
	"k8s.io/kubernetes/cmd/" + KubeScheduler,
	"k8s.io/kubernetes/cmd/" + Kubectl,
}

// kwokStages are the kwok stage folders (under the kwok module's kustomize/stage) copied into
// the cache: nodes become Ready at once and keep heartbeating; pods become Ready, Jobs' pods
// complete, deleted pods go away.
var kwokStages = []string{"node/fast", "node/heartbeat", "pod/fast"}

// versionLDFlags stamp the Kubernetes version into the binaries as the release build does.
func versionLDFlags() string {
	major, minor := "1", "37"
	var b strings.Builder
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		fmt.Fprintf(&b, " -X %s.gitVersion=%s -X %s.gitMajor=%s -X %s.gitMinor=%s -X %s.gitTreeState=clean",
			pkg, KubernetesVersion, pkg, major, pkg, minor, pkg)
	}
	return "-s -w" + b.String()
}

// BuildOptions configure Build.
type BuildOptions struct {
	// E2EDir is the e2e module folder (holding go.mod and tools/kwok); its parent is the
	// repository root, where cmd/kelemetry is built.
	E2EDir string
	// CacheDir receives the binaries.
	CacheDir string
	// Force rebuilds the control plane and the tools even when their stamps match.
	Force bool
	// Output receives the go command's output (os.Stderr when nil).
	Output io.Writer
	Logger *slog.Logger
}

// BuildReport says what Build did.
type BuildReport struct {
	// ControlPlaneCached is true when the control plane and kwok were reused from the cache.
	ControlPlaneCached bool
	// Tools maps each tool built from its tool module (Jaeger, promtool, helm) to its build
	// time; a tool reused from the cache is absent.
	Tools map[string]time.Duration
	// Build times (zero when reused).
	ControlPlane time.Duration
	Kwok         time.Duration
	AllInOne     time.Duration
	NATSServer   time.Duration
}

// Build builds the binaries into opts.CacheDir. The control plane and kwok are reused when their
// stamp file says they were built from the same go.mod files with the same Go version and
// builder; each tool (Jaeger, promtool, helm) likewise, with a stamp file of its own (its tool
// module's go.mod and go.sum, the Go version, the builder). A cold Jaeger build takes about 13
// minutes and 2.3 GB of memory on 2 cores. cmd/kelemetry is always rebuilt (the Go build cache makes that fast) because it is
// this repository's code under test, and so is nats-server, from the repository's module (its
// go.mod pins the version; about 1.5 minutes cold on 2 cores, seconds from the build cache), so
// that it never needs a change of the e2e module's go.mod, which would rebuild the control plane.
func Build(ctx context.Context, opts BuildOptions) (BuildReport, error) {
	var rep BuildReport
	if opts.Output == nil {
		opts.Output = os.Stderr
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	e2eDir, err := filepath.Abs(opts.E2EDir)
	if err != nil {
		return rep, err
	}
	if err := os.MkdirAll(opts.CacheDir, 0o755); err != nil {
		return rep, fmt.Errorf("cache folder: %w", err)
	}
	unlock, err := lock(filepath.Join(opts.CacheDir, ".lock"))
	if err != nil {
		return rep, err
	}
	defer unlock()

	goVersion, err := goOutput(ctx, e2eDir, "env", "GOVERSION")
	if err != nil {
		return rep, err
	}
	key, err := stampKey(e2eDir, goVersion)
	if err != nil {
		return rep, err
	}
	toolKeys := map[string]string{}
	for _, t := range tools {
		if toolKeys[t.name], err = toolStampKey(e2eDir, goVersion, t); err != nil {
			return rep, err
		}
	}
	todo := plan(opts.CacheDir, key, toolKeys, opts.Force)
	if !todo.controlPlane {
		rep.ControlPlaneCached = true
		opts.Logger.Info("control plane reused from the cache", "dir", opts.CacheDir, "kubernetes", KubernetesVersion, "go", goVersion)
	} else {
		if err := buildControlPlane(ctx, opts, e2eDir, &rep); err != nil {
			return rep, err
		}
		if err := os.WriteFile(filepath.Join(opts.CacheDir, controlPlaneStamp), []byte(key+"\n"), 0o644); err != nil {
			return rep, fmt.Errorf("stamp: %w", err)
		}
	}
	rep.Tools = map[string]time.Duration{}
	for _, t := range tools {
		if !todo.tools[t.name] {
			opts.Logger.Info(t.name+" reused from the cache", "dir", opts.CacheDir, "go", goVersion)
			continue
		}
		took, err := buildTool(ctx, opts, e2eDir, t)
		if err != nil {
			return rep, err
		}
		rep.Tools[t.name] = took
		if err := os.WriteFile(filepath.Join(opts.CacheDir, t.stamp), []byte(toolKeys[t.name]+"\n"), 0o644); err != nil {
			return rep, fmt.Errorf("%s stamp: %w", t.name, err)
		}
	}

	start := time.Now()
	tmp, err := os.MkdirTemp(opts.CacheDir, ".build-")
	if err != nil {
		return rep, err
	}
	defer os.RemoveAll(tmp)
	opts.Logger.Info("building cmd/kelemetry")
	if err := goBuild(ctx, filepath.Dir(e2eDir), opts.Output, filepath.Join(tmp, AllInOne), "-s -w", "./cmd/kelemetry"); err != nil {
		return rep, err
	}
	if err := os.Rename(filepath.Join(tmp, AllInOne), filepath.Join(opts.CacheDir, AllInOne)); err != nil {
		return rep, err
	}
	opts.Logger.Info("building cmd/kubectl-kelemetry")
	if err := goBuild(ctx, filepath.Dir(e2eDir), opts.Output, filepath.Join(tmp, KubectlPlugin), "-s -w", "./cmd/kubectl-kelemetry"); err != nil {
		return rep, err
	}
	if err := os.Rename(filepath.Join(tmp, KubectlPlugin), filepath.Join(opts.CacheDir, KubectlPlugin)); err != nil {
		return rep, err
	}
	rep.AllInOne = time.Since(start)

	start = time.Now()
	opts.Logger.Info("building nats-server", "package", NATSServerPackage)
	if err := goBuild(ctx, filepath.Dir(e2eDir), opts.Output, filepath.Join(tmp, NATSServer), "-s -w", NATSServerPackage); err != nil {
		return rep, err
	}
	if err := os.Rename(filepath.Join(tmp, NATSServer), filepath.Join(opts.CacheDir, NATSServer)); err != nil {
		return rep, err
	}
	rep.NATSServer = time.Since(start)
	return rep, nil
}

// buildPlan says which cached parts Build must (re)build.
type buildPlan struct {
	controlPlane bool
	// tools holds the names of the tools to build.
	tools map[string]bool
}

// plan compares the cache folder with the stamp keys of what would be built (toolKeys: each
// tool's): a part is rebuilt when forced, when its stamp differs, or when one of its files is
// missing.
func plan(cacheDir, controlPlaneKey string, toolKeys map[string]string, force bool) buildPlan {
	stampIs := func(name, key string) bool {
		old, err := os.ReadFile(filepath.Join(cacheDir, name))
		return err == nil && strings.TrimSpace(string(old)) == key
	}
	p := buildPlan{tools: map[string]bool{}}
	isTool := map[string]bool{}
	for _, t := range tools {
		isTool[t.name] = true
	}
	for _, name := range Missing(cacheDir) {
		switch {
		case name == AllInOne || name == KubectlPlugin || name == NATSServer: // always rebuilt
		case isTool[name]:
			p.tools[name] = true
		default:
			p.controlPlane = true
		}
	}
	p.controlPlane = p.controlPlane || force || !stampIs(controlPlaneStamp, controlPlaneKey)
	for _, t := range tools {
		p.tools[t.name] = p.tools[t.name] || force || !stampIs(t.stamp, toolKeys[t.name])
	}
	return p
}

// buildTool builds t from its tool module into the cache folder and returns how long it took.
func buildTool(ctx context.Context, opts BuildOptions, e2eDir string, t tool) (time.Duration, error) {
	tmp, err := os.MkdirTemp(opts.CacheDir, ".build-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	start := time.Now()
	opts.Logger.Info("building "+t.name+" (a cold build takes "+t.cold+")", "package", t.pkg)
	if t.builderConfig == "" {
		if err := goBuild(ctx, filepath.Join(e2eDir, "tools", t.dir), opts.Output, filepath.Join(tmp, t.name), t.ldflags, t.pkg); err != nil {
			return 0, err
		}
	} else if err := buildDistribution(ctx, opts, filepath.Join(e2eDir, "tools", t.dir), tmp, t); err != nil {
		return 0, err
	}
	if err := os.Rename(filepath.Join(tmp, t.name), filepath.Join(opts.CacheDir, t.name)); err != nil {
		return 0, err
	}
	took := time.Since(start)
	opts.Logger.Info(t.name+" built", "took", took.Round(time.Second))
	return took, nil
}

// buildDistribution builds the Collector builder pinned by t's tool module, runs it on t's
// builder configuration with the distribution's sources in tmp/src, and leaves the binary at
// tmp/<t.name>. The builder resolves the components' modules through the Go module proxy.
func buildDistribution(ctx context.Context, opts BuildOptions, toolDir, tmp string, t tool) error {
	builder := filepath.Join(tmp, "builder")
	if err := goBuild(ctx, toolDir, opts.Output, builder, "-s -w", t.pkg); err != nil {
		return err
	}
	cfg, err := os.ReadFile(filepath.Join(toolDir, t.builderConfig))
	if err != nil {
		return fmt.Errorf("%s: %w", t.name, err)
	}
	src := filepath.Join(tmp, "src")
	// The output folder is set here, not in the committed configuration.
	withOutput := "\n" + string(cfg)
	if !strings.Contains(withOutput, "\ndist:\n") {
		return fmt.Errorf("%s: %s has no top-level dist section", t.name, t.builderConfig)
	}
	withOutput = strings.Replace(withOutput, "\ndist:\n", "\ndist:\n  output_path: "+strconv.Quote(src)+"\n", 1)
	cfgPath := filepath.Join(tmp, "builder-config.yaml")
	if err := os.WriteFile(cfgPath, []byte(withOutput), 0o644); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, builder, "--config", cfgPath, "--ldflags", t.ldflags)
	cmd.Dir = tmp
	cmd.Stdout, cmd.Stderr = opts.Output, opts.Output
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("collector builder (%s): %w", t.builderConfig, err)
	}
	// The configuration's dist.name is the tool's name.
	if err := os.Rename(filepath.Join(src, t.name), filepath.Join(tmp, t.name)); err != nil {
		return fmt.Errorf("%s: the builder made no %s (dist.name of %s must be that): %w", t.name, t.name, t.builderConfig, err)
	}
	return nil
}

func buildControlPlane(ctx context.Context, opts BuildOptions, e2eDir string, rep *BuildReport) error {
	tmp, err := os.MkdirTemp(opts.CacheDir, ".build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	start := time.Now()
	opts.Logger.Info("building the Kubernetes control plane (a cold build takes 20-35 minutes on 2 cores)", "kubernetes", KubernetesVersion)
	if err := goBuild(ctx, e2eDir, opts.Output, tmp+string(filepath.Separator), versionLDFlags(), controlPlanePackages...); err != nil {
		return err
	}
	rep.ControlPlane = time.Since(start)
	opts.Logger.Info("control plane built", "took", rep.ControlPlane.Round(time.Second))

	start = time.Now()
	kwokDir := filepath.Join(e2eDir, "tools", "kwok")
	opts.Logger.Info("building kwok")
	if err := goBuild(ctx, kwokDir, opts.Output, filepath.Join(tmp, Kwok), "-s -w", "sigs.k8s.io/kwok/cmd/kwok"); err != nil {
		return err
	}
	modDir, err := goOutput(ctx, kwokDir, "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok")
	if err != nil {
		return err
	}
	stagesTmp := filepath.Join(tmp, KwokStagesDir)
	if err := os.MkdirAll(stagesTmp, 0o755); err != nil {
		return err
	}
	for _, stage := range kwokStages {
		files, err := filepath.Glob(filepath.Join(modDir, "kustomize", "stage", filepath.FromSlash(stage), "*.yaml"))
		if err != nil {
			return err
		}
		for _, f := range files {
			if filepath.Base(f) == "kustomization.yaml" {
				continue
			}
			data, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			name := strings.ReplaceAll(stage, "/", "-") + "-" + filepath.Base(f)
			if err := os.WriteFile(filepath.Join(stagesTmp, name), data, 0o644); err != nil {
				return err
			}
		}
	}
	rep.Kwok = time.Since(start)
	opts.Logger.Info("kwok built", "took", rep.Kwok.Round(time.Second))

	for _, name := range []string{KubeAPIServer, KubeControllerManager, KubeScheduler, Kubectl, Kwok} {
		if err := os.Rename(filepath.Join(tmp, name), filepath.Join(opts.CacheDir, name)); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(filepath.Join(opts.CacheDir, KwokStagesDir)); err != nil {
		return err
	}
	return os.Rename(stagesTmp, filepath.Join(opts.CacheDir, KwokStagesDir))
}

// stampKey identifies a control-plane build: builder, Go version, and the go.mod files that pin
// every dependency version (go.sum only holds their hashes).
func stampKey(e2eDir, goVersion string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "builder %s\ngo %s\nldflags %s\n", builderVersion, goVersion, versionLDFlags())
	for _, rel := range []string{"go.mod", "tools/kwok/go.mod"} {
		data, err := os.ReadFile(filepath.Join(e2eDir, filepath.FromSlash(rel)))
		if err != nil {
			return "", fmt.Errorf("stamp: %w", err)
		}
		fmt.Fprintf(h, "%s %d\n", rel, len(data))
		h.Write(data)
	}
	return KubernetesVersion + " " + hex.EncodeToString(h.Sum(nil)), nil
}

// toolStampKey identifies a tool's build: builder, Go version, flags, and the tool module's
// go.mod and go.sum.
func toolStampKey(e2eDir, goVersion string, t tool) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "builder %s\ngo %s\nldflags %s\n", t.builder, goVersion, t.ldflags)
	inputs := []string{"tools/" + t.dir + "/go.mod", "tools/" + t.dir + "/go.sum"}
	if t.builderConfig != "" {
		inputs = append(inputs, "tools/"+t.dir+"/"+t.builderConfig)
	}
	for _, rel := range inputs {
		data, err := os.ReadFile(filepath.Join(e2eDir, filepath.FromSlash(rel)))
		if err != nil {
			return "", fmt.Errorf("%s stamp: %w", t.name, err)
		}
		fmt.Fprintf(h, "%s %d\n", rel, len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func goBuild(ctx context.Context, dir string, out io.Writer, output, ldflags string, pkgs ...string) error {
	args := append([]string{"build", "-trimpath", "-buildvcs=false", "-ldflags=" + ldflags, "-o", output}, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Stdout = out
	cmd.Stderr = out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s (in %s): %w", strings.Join(pkgs, " "), dir, err)
	}
	return nil
}

func goOutput(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// lock takes an exclusive lock on path, so that two builders never build at the same time.
func lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

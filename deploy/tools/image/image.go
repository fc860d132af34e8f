// Package image builds the container image of Kelemetry's all-in-one without a Docker daemon:
// the static binary (CGO_ENABLED=0, version and commit stamped with -ldflags -X) is appended as
// one layer to an empty base. The image runs as a non-root user (65532), keeps its data under
// one volume (/data, also the working directory) and writes nowhere else, so it runs with a
// read-only root filesystem.
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Where things are inside the image.
const (
	// BinaryPath is the all-in-one, the image's entrypoint.
	BinaryPath = "/usr/local/bin/kelemetry"
	// DataDir is the one directory the process writes to (mount a volume there).
	DataDir = "/data"
	// UID and GID of the non-root user the image runs as.
	UID = 65532
	GID = 65532
	// VersionPackage is the package whose Version and Commit variables are stamped.
	VersionPackage = "github.com/kelemetry/kelemetry/internal/version"
	// CABundlePath is where the CA bundle (Options.CABundle) goes; Go's TLS reads it there.
	CABundlePath = "/etc/ssl/certs/ca-certificates.crt"
)

// Options says what to build.
type Options struct {
	// SourceDir is the root of the kelemetry module (holding go.mod and cmd/kelemetry).
	SourceDir string
	// Version and Commit are stamped into the binary and set as image labels. An empty Commit
	// is taken from git in SourceDir when possible ("unknown" otherwise); an empty Version is
	// "devel".
	Version string
	Commit  string
	// Arch is the GOARCH of the binary and the image (default: the host's).
	Arch string
	// CABundle is a PEM file copied to CABundlePath for TLS to Jaeger or OTLP endpoints
	// (optional; a missing file is an error).
	CABundle string
	// Created stamps the image and its files (default: the Unix epoch, for reproducible builds).
	Created time.Time
	// Go is the go command (default "go" from PATH).
	Go string
}

// WithDefaults fills in the defaults.
func (o Options) WithDefaults(ctx context.Context) Options {
	if o.Version == "" {
		o.Version = "devel"
	}
	if o.Commit == "" {
		o.Commit = gitCommit(ctx, o.SourceDir)
	}
	if o.Arch == "" {
		o.Arch = runtime.GOARCH
	}
	if o.Go == "" {
		o.Go = "go"
	}
	if o.Created.IsZero() {
		o.Created = time.Unix(0, 0).UTC()
	}
	return o
}

// Validate checks the options.
func (o Options) Validate() error {
	if o.SourceDir == "" {
		return errors.New("image: SourceDir is required")
	}
	if _, err := os.Stat(filepath.Join(o.SourceDir, "cmd", "kelemetry")); err != nil {
		return fmt.Errorf("image: SourceDir %q is not the kelemetry module: %w", o.SourceDir, err)
	}
	for _, s := range []string{o.Version, o.Commit} {
		if strings.ContainsAny(s, " \t\n'\"") {
			return fmt.Errorf("image: version and commit must not contain spaces or quotes: %q", s)
		}
	}
	return nil
}

func gitCommit(ctx context.Context, dir string) string {
	out, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// BuildBinary compiles the static all-in-one into out.
func BuildBinary(ctx context.Context, o Options, out string) error {
	o = o.WithDefaults(ctx)
	if err := o.Validate(); err != nil {
		return err
	}
	ldflags := fmt.Sprintf("-s -w -X %s.Version=%s -X %s.Commit=%s", VersionPackage, o.Version, VersionPackage, o.Commit)
	abs, err := filepath.Abs(out)
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	cmd := exec.CommandContext(ctx, o.Go, "build", "-trimpath", "-ldflags", ldflags, "-o", abs, "./cmd/kelemetry")
	cmd.Dir = o.SourceDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+o.Arch)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("image: go build: %w: %s", err, stderr.String())
	}
	return nil
}

// Build compiles the binary and assembles the image.
func Build(ctx context.Context, o Options) (v1.Image, error) {
	o = o.WithDefaults(ctx)
	if err := o.Validate(); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "kelemetry-image-")
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	bin := filepath.Join(tmp, "kelemetry")
	if err := BuildBinary(ctx, o, bin); err != nil {
		return nil, err
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	var ca []byte
	if o.CABundle != "" {
		if ca, err = os.ReadFile(o.CABundle); err != nil {
			return nil, fmt.Errorf("image: CA bundle: %w", err)
		}
	}
	sbom, err := SBOM(binary, o)
	if err != nil {
		return nil, err
	}
	return Assemble(o, binary, ca, sbom)
}

// Assemble puts an already built binary (and an optional CA bundle and SBOM, see SBOM) on the
// empty base.
func Assemble(o Options, binary, caBundle, sbom []byte) (v1.Image, error) {
	if o.Created.IsZero() {
		o.Created = time.Unix(0, 0).UTC()
	}
	layerTar, err := rootfs(binary, caBundle, sbom, o.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: o.Created}, CreatedBy: "kelemetry deploy/tools/cmd/buildimage", Comment: "static all-in-one binary",
	}})
	if err != nil {
		return nil, fmt.Errorf("image: append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image: config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", o.Arch, v1.Time{Time: o.Created}
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", UID, GID),
		Entrypoint: []string{BinaryPath},
		// Listen on every interface (behind a Service) and keep the store in the volume.
		Cmd:          []string{"--data-dir=" + DataDir, "--audit-addr=:8080", "--http-addr=:16686"},
		WorkingDir:   DataDir,
		Env:          []string{"PATH=/usr/local/bin", "HOME=" + DataDir},
		Volumes:      map[string]struct{}{DataDir: {}},
		ExposedPorts: map[string]struct{}{"8080/tcp": {}, "16686/tcp": {}},
		Labels: map[string]string{
			"org.opencontainers.image.title":       "kelemetry",
			"org.opencontainers.image.description": "Kelemetry all-in-one: Kubernetes audit logs, Events and object diffs as traces",
			"org.opencontainers.image.version":     o.Version,
			"org.opencontainers.image.revision":    o.Commit,
			"org.opencontainers.image.source":      "https://github.com/kelemetry/kelemetry",
			"org.opencontainers.image.licenses":    "Apache-2.0",
		},
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image: config: %w", err)
	}
	return img, nil
}

// rootfs is the layer: the binary, the data directory owned by the user, /etc/passwd and
// /etc/group naming the user, /tmp, and the CA bundle and the SBOM when given.
func rootfs(binary, caBundle, sbom []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64, uid int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: uid, Gid: uid, ModTime: mtime, Format: tar.FormatPAX})
	}
	file := func(name string, mode int64, body []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(body)), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:%s:/sbin/nologin\n", UID, GID, DataDir)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", GID)
	steps := []func() error{
		func() error { return dir("etc", 0o755, 0) },
		func() error { return file("etc/passwd", 0o644, []byte(passwd)) },
		func() error { return file("etc/group", 0o644, []byte(group)) },
		func() error { return dir("tmp", 0o1777, 0) },
		func() error { return dir("usr", 0o755, 0) },
		func() error { return dir("usr/local", 0o755, 0) },
		func() error { return dir("usr/local/bin", 0o755, 0) },
		func() error { return file(strings.TrimPrefix(BinaryPath, "/"), 0o755, binary) },
		func() error { return dir(strings.TrimPrefix(DataDir, "/"), 0o750, UID) },
	}
	if caBundle != nil {
		steps = append(steps,
			func() error { return dir("etc/ssl", 0o755, 0) },
			func() error { return dir("etc/ssl/certs", 0o755, 0) },
			func() error { return file(strings.TrimPrefix(CABundlePath, "/"), 0o644, caBundle) })
	}
	if sbom != nil {
		steps = append(steps,
			func() error { return dir("usr/share", 0o755, 0) },
			func() error { return dir("usr/share/sbom", 0o755, 0) },
			func() error { return file(strings.TrimPrefix(SBOMPath, "/"), 0o644, sbom) })
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return nil, fmt.Errorf("image: layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	return buf.Bytes(), nil
}

// WriteLayout writes img as an OCI image layout in dir (created or appended to), its reference
// name recorded in the org.opencontainers.image.ref.name annotation.
func WriteLayout(dir, ref string, img v1.Image) error {
	p, err := layout.FromPath(dir)
	if err != nil {
		if p, err = layout.Write(dir, empty.Index); err != nil {
			return fmt.Errorf("image: OCI layout %s: %w", dir, err)
		}
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
		return fmt.Errorf("image: OCI layout %s: %w", dir, err)
	}
	return nil
}

// WriteTarball writes img as a tarball that `docker load` and `podman load` take, tagged ref.
func WriteTarball(path, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image: reference %q: %w", ref, err)
	}
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		return fmt.Errorf("image: tarball %s: %w", path, err)
	}
	return nil
}

package image

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// entry is one file of a layer, read back.
type entry struct {
	hdr  *tar.Header
	body []byte
}

func readLayer(t *testing.T, l v1.Layer) map[string]entry {
	t.Helper()
	rc, err := l.Uncompressed()
	require.NoError(t, err)
	defer func() { _ = rc.Close() }()
	files := map[string]entry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		body, err := io.ReadAll(tr)
		require.NoError(t, err)
		files[strings.TrimSuffix(h.Name, "/")] = entry{h, body}
	}
	return files
}

// The image is built from the module, written as an OCI layout, read back from it, and the
// binary taken out of its layer runs and tells the stamped version.
func TestBuildImageReadBackAndRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the all-in-one")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const ver, commit = "v0.0.0-imagetest", "0123456789abcdef0123456789abcdef01234567"
	img, err := Build(ctx, Options{SourceDir: filepath.Join("..", "..", ".."), Version: ver, Commit: commit})
	require.NoError(t, err)

	dir := t.TempDir()
	require.NoError(t, WriteLayout(dir, "kelemetry:"+ver, img))
	idx, err := layout.ImageIndexFromPath(dir)
	require.NoError(t, err)
	im, err := idx.IndexManifest()
	require.NoError(t, err)
	require.Len(t, im.Manifests, 1)
	assert.Equal(t, "kelemetry:"+ver, im.Manifests[0].Annotations["org.opencontainers.image.ref.name"])
	back, err := idx.Image(im.Manifests[0].Digest)
	require.NoError(t, err)

	cf, err := back.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, "linux", cf.OS)
	assert.Equal(t, runtime.GOARCH, cf.Architecture)
	assert.Equal(t, "65532:65532", cf.Config.User, "non-root")
	assert.Equal(t, []string{"/usr/local/bin/kelemetry"}, cf.Config.Entrypoint)
	assert.Equal(t, []string{"--data-dir=/data", "--audit-addr=:8080", "--http-addr=:16686"}, cf.Config.Cmd)
	assert.Equal(t, "/data", cf.Config.WorkingDir)
	assert.Contains(t, cf.Config.Env, "HOME=/data")
	assert.Contains(t, cf.Config.Volumes, "/data")
	assert.Equal(t, ver, cf.Config.Labels["org.opencontainers.image.version"])
	assert.Equal(t, commit, cf.Config.Labels["org.opencontainers.image.revision"])

	layers, err := back.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1, "the binary on an empty base")
	files := readLayer(t, layers[0])
	bin, ok := files["usr/local/bin/kelemetry"]
	require.True(t, ok, "binary in the layer")
	assert.Equal(t, int64(0o755), bin.hdr.Mode)
	data, ok := files["data"]
	require.True(t, ok)
	assert.Equal(t, byte(tar.TypeDir), data.hdr.Typeflag)
	assert.Equal(t, UID, data.hdr.Uid, "the volume path is the user's")
	assert.Contains(t, string(files["etc/passwd"].body), "nonroot:x:65532:65532:")
	sbom, ok := files[strings.TrimPrefix(SBOMPath, "/")]
	require.True(t, ok, "the SBOM in the image")
	assert.Contains(t, string(sbom.body), `"spdxVersion": "SPDX-2.3"`)
	assert.Contains(t, string(sbom.body), `"pkg:golang/github.com/kelemetry/kelemetry@`+ver+`"`)
	for name, e := range files {
		if e.hdr.Typeflag == tar.TypeReg {
			assert.Equal(t, 0, e.hdr.Uid, "%s is root's: the process cannot change it", name)
		}
		assert.True(t, e.hdr.ModTime.Equal(time.Unix(0, 0)), "%s: reproducible mtime", name)
	}

	// Static: it runs with no loader. Run it out of the image with --version.
	exe := filepath.Join(t.TempDir(), "kelemetry")
	require.NoError(t, os.WriteFile(exe, bin.body, 0o755))
	out, err := exec.CommandContext(ctx, exe, "--version").CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Equal(t, "kelemetry "+ver+" (commit "+commit+", "+runtime.Version()+")", strings.TrimSpace(string(out)))
	if ldd, err := exec.LookPath("ldd"); err == nil {
		o, _ := exec.CommandContext(ctx, ldd, exe).CombinedOutput()
		assert.Contains(t, string(o), "not a dynamic executable")
	}
	t.Run("healthz with only the data dir writable", func(t *testing.T) {
		runHealthz(ctx, t, bin.body, cf.Config.Cmd, ver, commit)
	})

	// The same image as a docker-load tarball.
	tb := filepath.Join(t.TempDir(), "image.tar")
	require.NoError(t, WriteTarball(tb, "kelemetry:"+ver, img))
	fromTar, err := tarball.ImageFromPath(tb, nil)
	require.NoError(t, err)
	d1, err := fromTar.ConfigName()
	require.NoError(t, err)
	d2, err := back.ConfigName()
	require.NoError(t, err)
	assert.Equal(t, d2, d1)
}

// Two builds of the same source give the same image (no timestamps, no host paths).
func TestAssembleIsReproducible(t *testing.T) {
	o := Options{Version: "v1", Commit: "c"}
	a, err := Assemble(o, []byte("binary"), nil, nil)
	require.NoError(t, err)
	b, err := Assemble(o, []byte("binary"), nil, nil)
	require.NoError(t, err)
	da, err := a.Digest()
	require.NoError(t, err)
	db, err := b.Digest()
	require.NoError(t, err)
	assert.Equal(t, da, db)
}

func TestValidateRejectsBadOptions(t *testing.T) {
	assert.ErrorContains(t, Options{}.Validate(), "SourceDir is required")
	assert.ErrorContains(t, Options{SourceDir: t.TempDir()}.Validate(), "not the kelemetry module")
	assert.ErrorContains(t, Options{SourceDir: "../../..", Version: "v1 -X x=y"}.Validate(), "must not contain spaces")
}

// runHealthz runs the binary taken out of the image with the image's command, as the image's user
// when the test runs as root (otherwise as the test's user), from a read-only working folder,
// without HOME, with only its --data-dir writable, and checks that /healthz reports the stamped
// version and commit: what a read-only root filesystem and one volume leave it.
func runHealthz(ctx context.Context, t *testing.T, binary []byte, cmd []string, ver, commit string) {
	root, err := os.MkdirTemp("", "kelemetry-image-run")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	// Traversable by the image's user; only data is writable.
	require.NoError(t, os.Chmod(root, 0o755))
	exe := filepath.Join(root, "kelemetry")
	require.NoError(t, os.WriteFile(exe, binary, 0o555))
	work, data := filepath.Join(root, "work"), filepath.Join(root, "data")
	require.NoError(t, os.Mkdir(work, 0o555))
	require.NoError(t, os.Mkdir(data, 0o700))
	asImageUser := os.Geteuid() == 0
	if asImageUser {
		// root writes anywhere: run as the image's user, for whom work and root are read-only.
		require.NoError(t, os.Chown(data, UID, GID))
	}

	auditAddr, httpAddr := freeAddr(t), freeAddr(t)
	// The image's command; later flags win: the test's data dir and listeners on localhost.
	args := append(append([]string(nil), cmd...), "--data-dir="+data, "--audit-addr="+auditAddr, "--http-addr="+httpAddr)
	c := exec.Command(exe, args...)
	c.Dir = work
	c.Env = []string{} // no HOME, no XDG_*, nothing
	out := &syncBuffer{}
	c.Stdout, c.Stderr = out, out
	if asImageUser {
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: UID, Gid: GID}}
	}
	require.NoError(t, c.Start())
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		_ = c.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			return err
		case <-time.After(30 * time.Second):
			_ = c.Process.Kill()
			<-exited
			return errors.New("no exit 30s after SIGTERM")
		}
	}
	t.Cleanup(func() { _ = stop() })

	var h struct {
		Status, Version, Commit string
	}
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case err := <-exited:
			stopped = true
			t.Fatalf("exited before /healthz answered (%v):\n%s", err, out.String())
		default:
		}
		err := getJSON(ctx, "http://"+httpAddr+"/healthz", &h)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz: %v\n%s", err, out.String())
		}
		time.Sleep(100 * time.Millisecond) // the poll interval
	}
	assert.Equal(t, "ok", h.Status)
	assert.Equal(t, ver, h.Version, "the stamped version in /healthz")
	assert.Equal(t, commit, h.Commit, "the stamped commit in /healthz")
	require.NoError(t, stop(), "SIGTERM ends it cleanly:\n%s", out.String())
	assert.NotContains(t, strings.ToLower(out.String()), "permission denied", out.String())
	assert.NotContains(t, strings.ToLower(out.String()), "read-only file system", out.String())

	left, err := os.ReadDir(work)
	require.NoError(t, err)
	assert.Empty(t, left, "nothing written to the working folder")
	kept, err := os.ReadDir(data)
	require.NoError(t, err)
	assert.NotEmpty(t, kept, "the store is in the data dir")
}

// freeAddr returns a localhost address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// getJSON decodes the body of a 200 answer to GET url into v.
func getJSON(ctx context.Context, url string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("request %s: %w", url, err)
	}
	req.Close = true // no idle connection outlives the test
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("get %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("get %s: %s: %s", url, resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("decode %s: %w", url, err)
	}
	return nil
}

// syncBuffer is the process output, written by exec's copying goroutine while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A multi-architecture index: one image per architecture, each with its platform, its binary
// built for it, and its SBOM listing the modules compiled in.
func TestBuildIndexMultiArch(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the all-in-one twice")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	idx, err := BuildIndex(ctx, Options{SourceDir: filepath.Join("..", "..", ".."), Version: "v0.0.0-index", Commit: "c0ffee"}, []string{"amd64", "arm64"})
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, WriteLayoutIndex(dir, "kelemetry:v0.0.0-index", idx))
	top, err := layout.ImageIndexFromPath(dir)
	require.NoError(t, err)
	tm, err := top.IndexManifest()
	require.NoError(t, err)
	require.Len(t, tm.Manifests, 1)
	assert.Equal(t, "kelemetry:v0.0.0-index", tm.Manifests[0].Annotations["org.opencontainers.image.ref.name"])
	inner, err := top.ImageIndex(tm.Manifests[0].Digest)
	require.NoError(t, err)
	im, err := inner.IndexManifest()
	require.NoError(t, err)
	require.Len(t, im.Manifests, 2)
	for i, arch := range []string{"amd64", "arm64"} {
		d := im.Manifests[i]
		require.NotNil(t, d.Platform)
		assert.Equal(t, "linux", d.Platform.OS)
		assert.Equal(t, arch, d.Platform.Architecture)
		img, err := inner.Image(d.Digest)
		require.NoError(t, err)
		cf, err := img.ConfigFile()
		require.NoError(t, err)
		assert.Equal(t, arch, cf.Architecture)
		layers, err := img.Layers()
		require.NoError(t, err)
		files := readLayer(t, layers[0])
		f, err := elf.NewFile(bytes.NewReader(files["usr/local/bin/kelemetry"].body))
		require.NoError(t, err)
		want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
		assert.Equal(t, want, f.Machine, "the binary is built for %s", arch)

		var sbom struct {
			SPDXVersion string `json:"spdxVersion"`
			Packages    []struct {
				Name        string `json:"name"`
				VersionInfo string `json:"versionInfo"`
			} `json:"packages"`
		}
		require.NoError(t, json.Unmarshal(files[strings.TrimPrefix(SBOMPath, "/")].body, &sbom))
		assert.Equal(t, "SPDX-2.3", sbom.SPDXVersion)
		names := map[string]string{}
		for _, p := range sbom.Packages {
			names[p.Name] = p.VersionInfo
		}
		assert.Equal(t, "v0.0.0-index", names["github.com/kelemetry/kelemetry"])
		assert.NotEmpty(t, names["go.uber.org/fx"], "a dependency of the binary")
		assert.NotEmpty(t, names["k8s.io/client-go"])
		assert.NotContains(t, names, "helm.sh/helm/v3", "only what the binary is made of")
	}
}

// The SBOM needs the binary's build information; a file without it is an error, not an empty SBOM.
func TestSBOMNeedsBuildInfo(t *testing.T) {
	_, err := SBOM([]byte("not a Go binary"), Options{Version: "v1"})
	assert.ErrorContains(t, err, "no Go build information")
}

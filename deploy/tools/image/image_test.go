package image

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
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
	a, err := Assemble(o, []byte("binary"), nil)
	require.NoError(t, err)
	b, err := Assemble(o, []byte("binary"), nil)
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

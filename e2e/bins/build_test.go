package bins

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// fakeCache writes an executable file for each name, and the kwok stages, into a new folder.
func fakeCache(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, KwokStagesDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, KwokStagesDir, "node-fast.yaml"), []byte("kind: Stage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

var controlPlane = []string{KubeAPIServer, KubeControllerManager, KubeScheduler, Kubectl, Kwok}

func TestMissingListsJaeger(t *testing.T) {
	dir := fakeCache(t, append(slices.Clone(controlPlane), AllInOne, NATSServer)...)
	if got := Missing(dir); !slices.Equal(got, []string{Jaeger}) {
		t.Errorf("Missing = %v, want [%s]", got, Jaeger)
	}
	if !slices.Contains(All, Jaeger) {
		t.Errorf("All = %v lacks %s", All, Jaeger)
	}
}

// A cache built before nats-server was added lists it as missing, and the build adds it without
// rebuilding the control plane or Jaeger (it is built with the all-in-one, every time).
func TestPlanBuildsNATSServerWithTheAllInOne(t *testing.T) {
	dir := fakeCache(t, append(slices.Clone(controlPlane), AllInOne, Jaeger)...)
	if got := Missing(dir); !slices.Equal(got, []string{NATSServer}) {
		t.Errorf("Missing = %v, want [%s]", got, NATSServer)
	}
	writeStamp(t, dir, controlPlaneStamp, "cp-key")
	writeStamp(t, dir, jaegerStamp, "jaeger-key")
	if p := plan(dir, "cp-key", "jaeger-key", false); p.controlPlane || p.jaeger {
		t.Errorf("plan = %+v, want the control plane and Jaeger reused", p)
	}
}

// A cache built before Jaeger was added (control plane, kwok, all-in-one and the control-plane
// stamp) keeps its control plane: only Jaeger is built.
func TestPlanBuildsOnlyJaegerIntoAnOlderCache(t *testing.T) {
	dir := fakeCache(t, append(slices.Clone(controlPlane), AllInOne, NATSServer)...)
	writeStamp(t, dir, controlPlaneStamp, "cp-key")
	p := plan(dir, "cp-key", "jaeger-key", false)
	if p.controlPlane || !p.jaeger {
		t.Errorf("plan = %+v, want the control plane reused and Jaeger built", p)
	}
}

func TestPlan(t *testing.T) {
	all := append(slices.Clone(controlPlane), AllInOne, Jaeger, NATSServer)
	for _, tc := range []struct {
		name                 string
		files                []string
		cpStamp, jaegerStamp string
		force                bool
		wantCP, wantJaeger   bool
	}{
		{"everything cached", all, "cp-key", "jaeger-key", false, false, false},
		{"all-in-one missing only", append(slices.Clone(controlPlane), Jaeger), "cp-key", "jaeger-key", false, false, false},
		{"jaeger stamp differs", all, "cp-key", "old", false, false, true},
		{"jaeger stamp absent", all, "cp-key", "", false, false, true},
		{"control plane stamp differs", all, "old", "jaeger-key", false, true, false},
		{"kubectl missing", append(slices.Clone(controlPlane[:3]), Kwok, AllInOne, Jaeger), "cp-key", "jaeger-key", false, true, false},
		{"jaeger missing", append(slices.Clone(controlPlane), AllInOne), "cp-key", "jaeger-key", false, false, true},
		{"force", all, "cp-key", "jaeger-key", true, true, true},
		{"empty cache", nil, "", "", false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := fakeCache(t, tc.files...)
			if tc.files == nil {
				os.RemoveAll(filepath.Join(dir, KwokStagesDir))
			}
			if tc.cpStamp != "" {
				writeStamp(t, dir, controlPlaneStamp, tc.cpStamp)
			}
			if tc.jaegerStamp != "" {
				writeStamp(t, dir, jaegerStamp, tc.jaegerStamp)
			}
			p := plan(dir, "cp-key", "jaeger-key", tc.force)
			if p.controlPlane != tc.wantCP || p.jaeger != tc.wantJaeger {
				t.Errorf("plan = %+v, want control plane %v, jaeger %v", p, tc.wantCP, tc.wantJaeger)
			}
		})
	}
}

func writeStamp(t *testing.T, dir, name, key string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(key+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The stamps are independent: the Jaeger tool module is no input of the control plane's stamp
// (so that adding or bumping Jaeger never rebuilds Kubernetes), and the Jaeger stamp covers its
// go.mod, go.sum and the Go version.
func TestStampKeys(t *testing.T) {
	e2e := t.TempDir()
	write := func(rel, data string) {
		t.Helper()
		p := filepath.Join(e2e, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module e2e\n")
	write("tools/kwok/go.mod", "module kwok\n")
	write("tools/jaeger/go.mod", "module jaeger\n")
	write("tools/jaeger/go.sum", "sum 1\n")
	cp, err := stampKey(e2e, "go1.26.8")
	if err != nil {
		t.Fatal(err)
	}
	j, err := jaegerStampKey(e2e, "go1.26.8")
	if err != nil {
		t.Fatal(err)
	}
	write("tools/jaeger/go.mod", "module jaeger\n// bumped\n")
	if cp2, _ := stampKey(e2e, "go1.26.8"); cp2 != cp {
		t.Error("the Jaeger tool module changed the control plane's stamp")
	}
	j2, _ := jaegerStampKey(e2e, "go1.26.8")
	if j2 == j {
		t.Error("the Jaeger stamp ignores tools/jaeger/go.mod")
	}
	write("tools/jaeger/go.sum", "sum 2\n")
	if j3, _ := jaegerStampKey(e2e, "go1.26.8"); j3 == j2 {
		t.Error("the Jaeger stamp ignores tools/jaeger/go.sum")
	}
	j4, _ := jaegerStampKey(e2e, "go1.27.0")
	if j4 == j2 {
		t.Error("the Jaeger stamp ignores the Go version")
	}
}

// The control plane's stamp key is what caches built before Jaeger was added hold: changing it
// would rebuild Kubernetes (20-35 minutes) on every machine.
func TestControlPlaneStampUnchanged(t *testing.T) {
	e2e := t.TempDir()
	for rel, data := range map[string]string{"go.mod": "module e2e\n", "tools/kwok/go.mod": "module kwok\n"} {
		p := filepath.Join(e2e, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := stampKey(e2e, "go1.26.8")
	if err != nil {
		t.Fatal(err)
	}
	// The key of these inputs as computed before Jaeger was added (builder "2").
	const want = "v1.37.2 eaec0625e6b221fa8784d4d1194b844c4940d204aff41e5b902dc95499abe1d2"
	if got != want {
		t.Errorf("stampKey = %q, want %q", got, want)
	}
}

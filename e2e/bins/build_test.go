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
	dir := fakeCache(t, append(slices.Clone(controlPlane), AllInOne, KubectlPlugin, NATSServer, Promtool, Helm, OtelCol)...)
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
	dir := fakeCache(t, append(slices.Clone(controlPlane), AllInOne, KubectlPlugin, Jaeger, Promtool, Helm, OtelCol)...)
	if got := Missing(dir); !slices.Equal(got, []string{NATSServer}) {
		t.Errorf("Missing = %v, want [%s]", got, NATSServer)
	}
	writeStamp(t, dir, controlPlaneStamp, "cp-key")
	writeToolStamps(t, dir)
	if p := plan(dir, "cp-key", toolKeys(), false); p.controlPlane || p.tools[Jaeger] {
		t.Errorf("plan = %+v, want the control plane and Jaeger reused", p)
	}
}

// toolKeys are the stamp keys of the tools in the plan tests.
func toolKeys() map[string]string {
	return map[string]string{Jaeger: "jaeger-key", Promtool: "promtool-key", Helm: "helm-key", OtelCol: "otelcol-key"}
}

// writeToolStamps writes every tool's stamp with its key of toolKeys.
func writeToolStamps(t *testing.T, dir string) {
	t.Helper()
	for _, tl := range tools {
		writeStamp(t, dir, tl.stamp, toolKeys()[tl.name])
	}
}

// A cache built before promtool and helm were added (control plane, kwok, Jaeger, the all-in-one
// and their stamps) keeps its control plane and Jaeger: only the new tools are built.
func TestPlanBuildsOnlyTheNewToolsIntoAnOlderCache(t *testing.T) {
	dir := fakeCache(t, append(slices.Clone(controlPlane), AllInOne, KubectlPlugin, NATSServer, Jaeger)...)
	writeStamp(t, dir, controlPlaneStamp, "cp-key")
	writeStamp(t, dir, jaegerStamp, "jaeger-key")
	p := plan(dir, "cp-key", toolKeys(), false)
	if p.controlPlane || p.tools[Jaeger] || !p.tools[Promtool] || !p.tools[Helm] || !p.tools[OtelCol] {
		t.Errorf("plan = %+v, want the control plane and Jaeger reused, promtool, helm and the Collector built", p)
	}
}

func TestPlan(t *testing.T) {
	all := append(slices.Clone(controlPlane), AllInOne, KubectlPlugin, Jaeger, NATSServer, Promtool, Helm, OtelCol)
	without := func(name string) []string {
		return slices.DeleteFunc(slices.Clone(all), func(n string) bool { return n == name })
	}
	for _, tc := range []struct {
		name      string
		files     []string
		cpStamp   string
		stamps    map[string]string // tool -> stamp written (absent: none)
		force     bool
		wantCP    bool
		wantTools []string
	}{
		{"everything cached", all, "cp-key", toolKeys(), false, false, nil},
		{"all-in-one missing only", without(AllInOne), "cp-key", toolKeys(), false, false, nil},
		{"jaeger stamp differs", all, "cp-key", map[string]string{Jaeger: "old", Promtool: "promtool-key", Helm: "helm-key", OtelCol: "otelcol-key"}, false, false, []string{Jaeger}},
		{"helm stamp absent", all, "cp-key", map[string]string{Jaeger: "jaeger-key", Promtool: "promtool-key", OtelCol: "otelcol-key"}, false, false, []string{Helm}},
		{"collector missing", without(OtelCol), "cp-key", toolKeys(), false, false, []string{OtelCol}},
		{"control plane stamp differs", all, "old", toolKeys(), false, true, nil},
		{"kubectl missing", without(Kubectl), "cp-key", toolKeys(), false, true, nil},
		{"jaeger missing", without(Jaeger), "cp-key", toolKeys(), false, false, []string{Jaeger}},
		{"promtool missing", without(Promtool), "cp-key", toolKeys(), false, false, []string{Promtool}},
		{"force", all, "cp-key", toolKeys(), true, true, []string{Jaeger, Promtool, Helm, OtelCol}},
		{"empty cache", nil, "", nil, false, true, []string{Jaeger, Promtool, Helm, OtelCol}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := fakeCache(t, tc.files...)
			if tc.files == nil {
				os.RemoveAll(filepath.Join(dir, KwokStagesDir))
			}
			if tc.cpStamp != "" {
				writeStamp(t, dir, controlPlaneStamp, tc.cpStamp)
			}
			for _, tl := range tools {
				if key, ok := tc.stamps[tl.name]; ok {
					writeStamp(t, dir, tl.stamp, key)
				}
			}
			p := plan(dir, "cp-key", toolKeys(), tc.force)
			var gotTools []string
			for _, tl := range tools {
				if p.tools[tl.name] {
					gotTools = append(gotTools, tl.name)
				}
			}
			if p.controlPlane != tc.wantCP || !slices.Equal(gotTools, tc.wantTools) {
				t.Errorf("plan = %+v, want control plane %v, tools %v", p, tc.wantCP, tc.wantTools)
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

// The stamps are independent: a tool module is no input of the control plane's stamp (so that
// adding or bumping a tool never rebuilds Kubernetes) nor of another tool's, and a tool's stamp
// covers its go.mod, go.sum and the Go version. Jaeger's key is the one computed before the other
// tools were added: changing it would rebuild Jaeger (13 minutes) on every machine.
func TestToolStampKeys(t *testing.T) {
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
	for _, tl := range tools {
		write("tools/"+tl.dir+"/go.mod", "module "+tl.dir+"\n")
		write("tools/"+tl.dir+"/go.sum", "sum 1\n")
		if tl.builderConfig != "" {
			write("tools/"+tl.dir+"/"+tl.builderConfig, "dist:\n  name: "+tl.name+"\n")
		}
	}
	key := func(name, goVersion string) string {
		t.Helper()
		for _, tl := range tools {
			if tl.name == name {
				k, err := toolStampKey(e2e, goVersion, tl)
				if err != nil {
					t.Fatal(err)
				}
				return k
			}
		}
		t.Fatalf("no tool %s", name)
		return ""
	}
	// The key of these inputs as computed before promtool and helm were added (builder "1").
	if got, want := key(Jaeger, "go1.26.8"), "b81e571eb46a7da75e492788cff6c9f7b9763dd532859eb975b40380d3d12c00"; got != want {
		t.Errorf("Jaeger's stamp key = %s, want %s", got, want)
	}
	cp, err := stampKey(e2e, "go1.26.8")
	if err != nil {
		t.Fatal(err)
	}
	j, h := key(Jaeger, "go1.26.8"), key(Helm, "go1.26.8")
	write("tools/jaeger/go.mod", "module jaeger\n// bumped\n")
	if cp2, _ := stampKey(e2e, "go1.26.8"); cp2 != cp {
		t.Error("the Jaeger tool module changed the control plane's stamp")
	}
	if key(Helm, "go1.26.8") != h {
		t.Error("the Jaeger tool module changed helm's stamp")
	}
	j2 := key(Jaeger, "go1.26.8")
	if j2 == j {
		t.Error("the Jaeger stamp ignores tools/jaeger/go.mod")
	}
	write("tools/jaeger/go.sum", "sum 2\n")
	if j3 := key(Jaeger, "go1.26.8"); j3 == j2 {
		t.Error("the Jaeger stamp ignores tools/jaeger/go.sum")
	}
	o := key(OtelCol, "go1.26.8")
	write("tools/otelcol/builder-config.yaml", "dist:\n  name: otelcol-kelemetry\nreceivers: []\n")
	if key(OtelCol, "go1.26.8") == o {
		t.Error("the Collector's stamp ignores its builder configuration")
	}
	if key(Jaeger, "go1.27.0") == key(Jaeger, "go1.26.8") {
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

package query_test

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startJaeger runs the Jaeger v1.76.0 binary the e2e tier builds ($KELEMETRY_JAEGER_BIN, or
// jaeger in $KELEMETRY_E2E_CACHE or ~/.cache/kelemetry-e2e/bin; the benchmark is skipped without
// it) and returns its OTLP and jaeger.storage.v2 addresses. It is stopped when b ends.
func startJaeger(b *testing.B) (otlp, storage string) {
	b.Helper()
	bin := os.Getenv("KELEMETRY_JAEGER_BIN")
	if bin == "" {
		dir := os.Getenv("KELEMETRY_E2E_CACHE")
		if dir == "" {
			home, _ := os.UserHomeDir()
			dir = filepath.Join(home, ".cache", "kelemetry-e2e", "bin")
		}
		bin = filepath.Join(dir, "jaeger")
	}
	if _, err := os.Stat(bin); err != nil {
		b.Skipf("no Jaeger binary (%v): run ./scripts/e2e.sh once, or set KELEMETRY_JAEGER_BIN", err)
	}
	// health, remote storage, OTLP, metrics
	var ports [4]string
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		_, ports[i], _ = net.SplitHostPort(l.Addr().String())
		_ = l.Close()
	}
	tmpl, err := os.ReadFile(filepath.Join("..", "..", "testdata", "jaeger", "memory-backend.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	cfg := filepath.Join(dir, "jaeger.yaml")
	yaml := strings.NewReplacer("{HEALTH}", ports[0], "{REMOTE}", ports[1], "{OTLP}", ports[2], "{METRICS}", ports[3]).Replace(string(tmpl))
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		b.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "jaeger.log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "--config=file:"+cfg)
	cmd.Env = append(os.Environ(), "OTEL_TRACES_SAMPLER=always_off") // else remote_storage traces itself
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = logf.Close()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://127.0.0.1:" + ports[0] + "/status")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return "127.0.0.1:" + ports[2], "127.0.0.1:" + ports[1]
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logf.Name())
			b.Fatalf("jaeger not healthy after 30s: %v\n%s", err, log)
		}
		time.Sleep(50 * time.Millisecond) // the poll interval
	}
}

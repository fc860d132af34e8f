package frontend_test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// jaegerConfig runs Jaeger's memory backend behind an OTLP gRPC receiver and serves it through
// the remote_storage extension (jaeger.storage.v2), every listener on loopback.
const jaegerConfig = `service:
  extensions: [jaeger_storage, remote_storage, healthcheckv2]
  pipelines:
    traces: {receivers: [otlp], processors: [batch], exporters: [jaeger_storage_exporter]}
  telemetry: {logs: {level: warn}, metrics: {level: none}}
extensions:
  healthcheckv2: {use_v2: true, http: {endpoint: "%[1]s"}}
  jaeger_storage: {backends: {mem: {memory: {max_traces: 100000}}}}
  remote_storage: {endpoint: "%[2]s", storage: mem}
receivers:
  otlp: {protocols: {grpc: {endpoint: "%[3]s"}}}
processors:
  batch: {timeout: 100ms}
exporters:
  jaeger_storage_exporter: {trace_storage: mem}
`

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
	var addrs [3]string
	for i := range addrs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		addrs[i] = l.Addr().String()
		_ = l.Close()
	}
	dir := b.TempDir()
	cfg := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, jaegerConfig, addrs[0], addrs[1], addrs[2]), 0o600); err != nil {
		b.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "jaeger.log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "--config=file:"+cfg)
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
		resp, err := http.Get("http://" + addrs[0] + "/status")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return addrs[2], addrs[1]
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logf.Name())
			b.Fatalf("jaeger not healthy after 30s: %v\n%s", err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

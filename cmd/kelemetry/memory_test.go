package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kelemetry/kelemetry/internal/healthz"
	"github.com/kelemetry/kelemetry/internal/logtest"
	"github.com/kelemetry/kelemetry/storageapi/storagev2"
)

// Issue 35, finding 2: rounds of four concurrent heavy queries got the all-in-one OOM-killed
// under a 2 GiB limit. The tests below run the same load, scaled down: two distinct copies of
// the bulk fixture (clusters copy0 and copy1), and rounds of the heaviest query (the full tree
// of every Deployment, limit 1000) twice over the Jaeger HTTP API and twice over the storage
// API at once. Without a memory limit and the query memory budget the process peaks at about
// 800-880 MiB RSS on this data; the tests bound it at 602 MiB (GOMEMLIMIT 512 MiB) and 640 MiB
// (a memory cgroup). KELEMETRY_TEST_MEMORY_UNBOUNDED=1 runs them with both turned off, to show
// what they catch.
const (
	heavyRounds = 5
	heavyCopies = 2
)

// memoryUnbounded turns the memory limit and the query memory budget off (see above).
var memoryUnbounded = os.Getenv("KELEMETRY_TEST_MEMORY_UNBOUNDED") == "1"

// heavyFixture is the binary and the data folder the memory tests share, made once per test
// binary and removed by TestMain.
var heavyFixture struct {
	once      sync.Once
	dir       string
	bin, data string
	err       error
}

// removeHeavyFixture removes what heavyData made (TestMain calls it).
func removeHeavyFixture() {
	if heavyFixture.dir != "" {
		_ = os.RemoveAll(heavyFixture.dir)
	}
}

// heavyData builds the all-in-one as the image is built (CGO_ENABLED=0: Pebble's block cache is
// then Go memory, under GOMEMLIMIT) and stores heavyCopies copies of the bulk fixture through its
// webhook; it returns the binary and the data folder of the stopped process.
func heavyData(t *testing.T) (bin, data string) {
	t.Helper()
	f := &heavyFixture
	f.once.Do(func() {
		f.dir, f.err = os.MkdirTemp("", "kelemetry-memtest-")
		if f.err != nil {
			return
		}
		f.bin, f.data = filepath.Join(f.dir, "allinone"), filepath.Join(f.dir, "data")
		cmd := exec.Command("go", "build", "-o", f.bin, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			f.err = fmt.Errorf("build: %w: %s", err, out)
			return
		}
		p := startProcess(t, f.bin, f.data)
		batches := readBulkBatches(t)
		for i := range heavyCopies {
			c := *p
			c.auditURL = strings.TrimSuffix(p.auditURL, "/crash") + "/copy" + strconv.Itoa(i)
			postBatches(t, &c, batches, 0)
		}
		settled := func() bool {
			resp, err := http.Get(p.apiURL + "/healthz")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			var h healthz.Body
			return json.NewDecoder(resp.Body).Decode(&h) == nil && h.QueueDepth == 0 && h.LinkJobs == 0
		}
		if !assert.Eventually(t, settled, 60*time.Second, 100*time.Millisecond, "the fixture is not stored") {
			f.err = errors.New("the fixture was not stored in time")
			return
		}
		p.stop(t)
	})
	require.NoError(t, f.err)
	return f.bin, f.data
}

// boundedProcess is the all-in-one of a memory test.
type boundedProcess struct {
	cmd      *exec.Cmd
	apiURL   string
	grpcAddr string
	log      *logtest.Buffer
	exited   chan struct{}
}

// startBounded starts bin on data; with cgroup set, the process starts inside that cgroup (it
// reads its memory limit from its own cgroup at start).
func startBounded(t *testing.T, bin, data, cgroupProcs string, args ...string) *boundedProcess {
	t.Helper()
	apiAddr, grpcAddr := freeAddr(t), freeAddr(t)
	args = append([]string{"--cluster=crash", "--data-dir=" + data, "--audit-addr=127.0.0.1:0",
		"--http-addr=" + apiAddr, "--remote-storage-addr=" + grpcAddr, "--log-level=info", keepFixtures}, args...)
	var cmd *exec.Cmd
	if cgroupProcs == "" {
		cmd = exec.Command(bin, args...)
	} else {
		// The shell moves itself into the cgroup, then becomes the all-in-one (same process).
		cmd = exec.Command("/bin/sh", append([]string{"-c", `echo $$ > "$0" && exec "$@"`, cgroupProcs, bin}, args...)...)
	}
	log := &logtest.Buffer{}
	cmd.Stderr = log
	require.NoError(t, cmd.Start())
	p := &boundedProcess{cmd: cmd, apiURL: "http://" + apiAddr, grpcAddr: grpcAddr, log: log, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
	})
	require.Eventually(t, func() bool {
		select {
		case <-p.exited:
			return true
		default:
		}
		resp, err := http.Get(p.apiURL + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 60*time.Second, 50*time.Millisecond, "the all-in-one does not come up")
	require.True(t, p.alive(), "the all-in-one exited at start: %s", log.String())
	return p
}

func (p *boundedProcess) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// peakRSS is the process's peak resident memory (VmHWM), in bytes.
func (p *boundedProcess) peakRSS(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/<pid>/status")
	return 0
}

// metric reads one unlabelled value of the process's /metrics.
func (p *boundedProcess) metric(t *testing.T, name string) float64 {
	t.Helper()
	resp, err := http.Get(p.apiURL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			require.NoError(t, err)
			return f
		}
	}
	t.Fatalf("no %s in /metrics", name)
	return 0
}

// heavyRound sends the heaviest query four times at once, twice over each API, and reports how
// many were answered with a result. Every answer is a result (maybe truncated) or a refusal to
// retry later: 503 with Retry-After, ResourceExhausted.
func heavyRound(t *testing.T, p *boundedProcess, client storagev2.TraceReaderClient) int {
	t.Helper()
	const search = "/api/traces?service=tree%20%5Bfull%20tree%5D&start=0&limit=1000&tags=resource%3Ddeployments"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var (
		mu       sync.Mutex
		answered int
		wg       sync.WaitGroup
	)
	for range 2 {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.apiURL+search, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("search over HTTP: %v", err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK:
				mu.Lock()
				answered++
				mu.Unlock()
			case http.StatusServiceUnavailable:
				assert.NotEmpty(t, resp.Header.Get("Retry-After"))
			default:
				t.Errorf("search over HTTP: status %d", resp.StatusCode)
			}
		})
		wg.Go(func() {
			stream, err := client.FindTraces(ctx, &storagev2.FindTracesRequest{Query: &storagev2.TraceQueryParameters{
				ServiceName: "tree [full tree]", StartTimeMin: timestamppb.New(time.Unix(0, 0)), SearchDepth: 1000,
				Attributes: []*storagev2.KeyValue{{Key: "resource", Value: &storagev2.AnyValue{Value: &storagev2.AnyValue_StringValue{StringValue: "deployments"}}}},
			}})
			for err == nil {
				_, err = stream.Recv()
			}
			switch {
			case errors.Is(err, io.EOF):
				mu.Lock()
				answered++
				mu.Unlock()
			case status.Code(err) == codes.ResourceExhausted:
			default:
				t.Errorf("search over the storage API: %v", err)
			}
		})
	}
	wg.Wait()
	return answered
}

// runHeavyRounds runs heavyRounds rounds against p and requires the process to live through
// them, each round answering at least one query.
func runHeavyRounds(t *testing.T, p *boundedProcess) {
	t.Helper()
	conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	client := storagev2.NewTraceReaderClient(conn)
	for round := 1; round <= heavyRounds; round++ {
		start := time.Now()
		answered := heavyRound(t, p, client)
		require.True(t, p.alive(), "round %d: the all-in-one died (OOM-killed?)", round)
		t.Logf("round %d: %d of 4 answered in %s, peak RSS so far %d MiB", round, answered, time.Since(start).Round(10*time.Millisecond), p.peakRSS(t)>>20)
		assert.Positive(t, answered, "round %d: every query refused", round)
	}
}

// unboundedArgs are the flags of a run with KELEMETRY_TEST_MEMORY_UNBOUNDED=1.
func unboundedArgs(t *testing.T) []string {
	cfg := filepath.Join(t.TempDir(), "unbounded.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("memoryLimit: \"off\"\nquery:\n  maxMemoryBytes: -1\n"), 0o600))
	return []string{"--config=" + cfg}
}

// With memoryLimit 512MiB (the config key), rounds of the heaviest queries keep the process's
// peak RSS under 602 MiB, the container limit that 512 MiB would be the default 85% of. This
// test needs no cgroup: it runs everywhere the tests run (on Linux, for VmHWM).
func TestHeavyQueriesStayUnderGOMEMLIMIT(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the all-in-one binary")
	}
	const limit = 512 << 20
	bin, data := heavyData(t)
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("memoryLimit: 512MiB\n"), 0o600))
	args := []string{"--config=" + cfg}
	if memoryUnbounded {
		args = unboundedArgs(t)
	}
	p := startBounded(t, bin, data, "", args...)
	if !memoryUnbounded {
		assert.Equal(t, 1, strings.Count(p.log.String(), `msg="memory limit: GOMEMLIMIT 512 MiB" gomemlimit=536870912 reason="memoryLimit 536870912"`), "said once, at start:\n%s", p.log.String())
		assert.Contains(t, p.log.String(), `msg="query memory budget: 40% of the Go memory limit"`)
		assert.Equal(t, float64(limit), p.metric(t, "go_gc_gomemlimit_bytes"))
	}
	runHeavyRounds(t, p)
	peak := p.peakRSS(t)
	bound := int64(limit) * 100 / 85
	t.Logf("peak RSS %d MiB, bound %d MiB", peak>>20, bound>>20)
	assert.Less(t, peak, bound, "peak RSS")
}

// memoryCgroup creates a child of the test's own memory cgroup (cgroup v1 or v2) limited to
// limit bytes and returns its directory, the file a process writes its PID to, and how to read
// its OOM kills; it skips the test when cgroups cannot be written here (not root, no memory
// controller delegated, not Linux).
func memoryCgroup(t *testing.T, limit int64) (dir, procs string, oomKills func() int) {
	t.Helper()
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skipf("no /proc/self/cgroup: %v", err)
	}
	var v1, v2 string
	for _, line := range strings.Split(strings.TrimSpace(string(own)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2 = parts[2]
		case strings.Contains(","+parts[1]+",", ",memory,"):
			v1 = parts[2]
		}
	}
	name := fmt.Sprintf("kelemetry-memtest-%d", os.Getpid())
	var limitFile, eventsFile, eventsKey string
	switch {
	case v1 != "":
		dir = filepath.Join("/sys/fs/cgroup/memory", v1, name)
		limitFile, eventsFile, eventsKey = "memory.limit_in_bytes", "memory.oom_control", "oom_kill"
	case v2 != "":
		dir = filepath.Join("/sys/fs/cgroup", v2, name)
		limitFile, eventsFile, eventsKey = "memory.max", "memory.events", "oom_kill"
	default:
		t.Skip("no memory cgroup in /proc/self/cgroup")
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot create a memory cgroup (run as root on a host that delegates the memory controller): %v", err)
	}
	t.Cleanup(func() {
		// The processes in it were killed by their own cleanups (registered later, run earlier).
		assert.Eventually(t, func() bool {
			err := os.Remove(dir)
			return err == nil || errors.Is(err, fs.ErrNotExist)
		}, 10*time.Second, 50*time.Millisecond, "remove %s", dir)
	})
	if err := os.WriteFile(filepath.Join(dir, limitFile), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		t.Skipf("cannot limit the memory of a cgroup here: %v", err)
	}
	oomKills = func() int {
		data, err := os.ReadFile(filepath.Join(dir, eventsFile))
		require.NoError(t, err)
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, eventsKey+" "); ok {
				n, err := strconv.Atoi(strings.TrimSpace(v))
				require.NoError(t, err)
				return n
			}
		}
		return 0 // kernels before 4.13 do not count OOM kills
	}
	return dir, filepath.Join(dir, "cgroup.procs"), oomKills
}

// The reproduction, scaled down: the all-in-one runs in a memory cgroup of 640 MiB with
// its default configuration, so it sets GOMEMLIMIT from the cgroup (85%: 544 MiB) and the query
// memory budget from that; rounds of the heaviest queries leave it alive, not OOM-killed, with
// its peak RSS under the limit.
func TestHeavyQueriesInMemoryCgroup(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the all-in-one binary")
	}
	const limit = 640 << 20
	dir, procs, oomKills := memoryCgroup(t, limit)
	bin, data := heavyData(t)
	var args []string
	if memoryUnbounded {
		args = unboundedArgs(t)
	}
	p := startBounded(t, bin, data, procs, args...)
	if !memoryUnbounded {
		assert.Contains(t, p.log.String(), fmt.Sprintf(`msg="memory limit: GOMEMLIMIT 544 MiB" gomemlimit=%d reason="85%% of the container's memory limit (%s/`, int64(limit)*85/100, dir), p.log.String())
		assert.Equal(t, float64(int64(limit)*85/100), p.metric(t, "go_gc_gomemlimit_bytes"))
	}
	runHeavyRounds(t, p)
	peak := p.peakRSS(t)
	t.Logf("peak RSS %d MiB in a cgroup of %d MiB", peak>>20, limit>>20)
	assert.Less(t, peak, int64(limit), "peak RSS")
	assert.Zero(t, oomKills(), "OOM kills in the cgroup")
}

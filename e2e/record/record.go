// Package record runs a named scenario (package scenario) against a fresh test cluster wired to
// a Kelemetry all-in-one and writes what the control plane produced, in the formats of the
// recorded fixtures the golden tests use:
//
//   - audit.jsonl: kube-apiserver's --audit-log-path lines (one audit.k8s.io/v1 Event each)
//     received during the scenario;
//   - webhook-batches.jsonl: the bodies kube-apiserver posted to its audit webhook (one
//     audit.k8s.io/v1 EventList each) that carry an event of the scenario, recorded by a proxy
//     between kube-apiserver and the all-in-one;
//   - events-core-v1.json, events-events-v1.json: the Events of the scenario's namespace listed
//     through core/v1 and events.k8s.io/v1 after the scenario;
//   - commands.log: the scenario's steps, one a line, with their times.
package record

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kelemetry/kelemetry/e2e/cluster"
	"github.com/kelemetry/kelemetry/e2e/scenario"
)

// Names of the files Run writes in the output folder.
const (
	AuditFile          = "audit.jsonl"
	WebhookBatchesFile = "webhook-batches.jsonl"
	EventsCoreV1File   = "events-core-v1.json"
	EventsV1File       = "events-events-v1.json"
	CommandsFile       = "commands.log"
)

// DefaultSettle is how long Run waits after the scenario before listing the Events and closing
// the recorded time span: controllers and kwok finish their last writes.
const DefaultSettle = 5 * time.Second

// Options configure Run.
type Options struct {
	// Scenario is the name of a registered scenario (scenario.Names).
	Scenario string
	// OutDir receives the files; it is created when missing, existing files are replaced.
	OutDir string
	// Namespace is the scenario's namespace (default: the scenario's name).
	Namespace string
	// BinDir holds the binaries (default: bins.Dir()).
	BinDir string
	// AuditPolicyFile is kube-apiserver's audit policy (default: cluster.DefaultAuditPolicy).
	AuditPolicyFile string
	// Settle is the wait after the scenario (default DefaultSettle; negative: none).
	Settle time.Duration
	// WorkDir holds the cluster's files and the raw webhook recording (default: a temporary
	// folder, removed at the end unless KeepWorkDir or the scenario failed).
	WorkDir     string
	KeepWorkDir bool
	Logger      *slog.Logger
}

// Result summarises a recording.
type Result struct {
	// Start and End bound the recorded span.
	Start, End time.Time
	// AuditEvents and WebhookBatches count the lines written; WebhookRequests counts every body
	// the proxy received (the whole cluster's life).
	AuditEvents, WebhookBatches, WebhookRequests int
	// CoreEvents and EventsV1 count the listed Events.
	CoreEvents, EventsV1 int
	// Steps counts the lines of commands.log.
	Steps int
}

// Run starts a fresh test cluster and all-in-one, runs the scenario, stops everything and
// writes the recording into opts.OutDir.
func Run(ctx context.Context, opts Options) (_ *Result, err error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	logger := opts.Logger
	sc, ok := scenario.Lookup(opts.Scenario)
	if !ok {
		return nil, fmt.Errorf("unknown scenario %q (have %s)", opts.Scenario, strings.Join(scenario.Names(), ", "))
	}
	if opts.OutDir == "" {
		return nil, errors.New("no output folder")
	}
	if opts.Namespace == "" {
		opts.Namespace = sc.Name
	}
	if opts.Settle == 0 {
		opts.Settle = DefaultSettle
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, err
	}
	workDir := opts.WorkDir
	if workDir == "" {
		if workDir, err = os.MkdirTemp("", "kelemetry-record-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(workDir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if opts.KeepWorkDir || err != nil {
			logger.Info("kept the work folder: component logs, audit.log, webhook-raw.jsonl", "dir", workDir)
			return
		}
		os.RemoveAll(workDir)
	}()

	// The proxy outlives the cluster: kube-apiserver flushes its last batches when it stops.
	proxy := newWebhookRecorder(filepath.Join(workDir, "webhook-raw.jsonl"), logger)
	res := &Result{}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n, cerr := proxy.close(cctx)
		res.WebhookRequests = n
		if cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()

	t0 := time.Now()
	env, err := cluster.StartEnv(ctx, cluster.EnvOptions{
		BinDir:          opts.BinDir,
		ClusterName:     "record",
		AuditPolicyFile: opts.AuditPolicyFile,
		WorkDir:         filepath.Join(workDir, "env"),
		KeepWorkDir:     true, // removed with workDir
		AuditWebhookVia: proxy.start,
		Logger:          logger,
	})
	if err != nil {
		return nil, fmt.Errorf("start the test cluster: %w", err)
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return env.Stop(sctx)
	}
	defer func() {
		if serr := stop(); serr != nil {
			err = errors.Join(err, fmt.Errorf("stop the test cluster: %w", serr))
		}
	}()
	logger.Info("test cluster ready", "took", time.Since(t0).Round(time.Millisecond), "scenario", sc.Name, "namespace", opts.Namespace)

	var steps []string
	sess := &scenario.Session{
		Client:    env.Cluster.Client,
		Namespace: opts.Namespace,
		Healthy:   env.Healthy,
		Step: func(line string) {
			logger.Info("step", "scenario", sc.Name, "step", line)
			steps = append(steps, time.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00")+" "+line)
		},
	}
	res.Start = time.Now()
	if err := scenario.CreateNamespace(ctx, sess); err != nil {
		return nil, err
	}
	if err := sc.Run(ctx, sess); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", sc.Name, err)
	}
	if opts.Settle > 0 {
		sess.Step(fmt.Sprintf("settle %s", opts.Settle))
		select {
		case <-time.After(opts.Settle):
		case <-ctx.Done():
			return nil, fmt.Errorf("interrupted while settling: %w", ctx.Err())
		}
	}
	if err := env.Healthy(); err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(env.Cluster.Config)
	if err != nil {
		return nil, err
	}
	sess.Step("list events core/v1 and events.k8s.io/v1 in namespace " + opts.Namespace)
	if res.CoreEvents, err = writeEvents(ctx, dyn, schema.GroupVersionResource{Version: "v1", Resource: "events"}, opts.Namespace, filepath.Join(opts.OutDir, EventsCoreV1File)); err != nil {
		return nil, err
	}
	if res.EventsV1, err = writeEvents(ctx, dyn, schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}, opts.Namespace, filepath.Join(opts.OutDir, EventsV1File)); err != nil {
		return nil, err
	}
	res.End = time.Now()

	// Stop the cluster first: kube-apiserver writes and posts its buffered audit events then.
	if err := stop(); err != nil {
		return nil, fmt.Errorf("stop the test cluster: %w", err)
	}
	if err := os.WriteFile(filepath.Join(opts.OutDir, CommandsFile), []byte(strings.Join(steps, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	res.Steps = len(steps)
	if res.AuditEvents, err = sliceLines(env.Cluster.AuditLog, filepath.Join(opts.OutDir, AuditFile), func(line []byte) (bool, error) {
		return auditEventIn(line, res.Start, res.End)
	}); err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if res.WebhookRequests, err = proxy.close(cctx); err != nil {
		return nil, err
	}
	if res.WebhookBatches, err = sliceLines(proxy.path, filepath.Join(opts.OutDir, WebhookBatchesFile), func(line []byte) (bool, error) {
		return batchIn(line, res.Start, res.End)
	}); err != nil {
		return nil, fmt.Errorf("webhook batches: %w", err)
	}
	logger.Info("recorded", "scenario", sc.Name, "out", opts.OutDir, "span", res.End.Sub(res.Start).Round(time.Millisecond),
		"auditEvents", res.AuditEvents, "webhookBatches", res.WebhookBatches, "coreEvents", res.CoreEvents, "eventsV1", res.EventsV1)
	return res, nil
}

// writeEvents lists the Events of a namespace through one API and writes them as kubectl's
// `get -o json` does: a v1 List whose items carry their kind and apiVersion, keys sorted, indented.
func writeEvents(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns, path string) (int, error) {
	list, err := dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list %s: %w", gvr, err)
	}
	items := make([]any, 0, len(list.Items))
	for _, it := range list.Items {
		items = append(items, it.Object)
	}
	out := map[string]any{
		"apiVersion": "v1",
		"kind":       "List",
		"items":      items,
		"metadata":   map[string]any{"resourceVersion": ""},
	}
	b, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		return 0, err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return 0, err
	}
	return len(items), nil
}

// sliceLines copies the lines of src that keep accepts to dst and returns how many.
func sliceLines(src, dst string, keep func(line []byte) (bool, error)) (n int, err error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	defer func() {
		if cerr := out.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	r := bufio.NewReaderSize(in, 1<<20)
	w := bufio.NewWriterSize(out, 1<<20)
	for lineNo := 1; ; lineNo++ {
		line, rerr := r.ReadBytes('\n')
		if t := bytes.TrimSpace(line); len(t) > 0 {
			ok, err := keep(t)
			if err != nil {
				return n, fmt.Errorf("%s:%d: %w", src, lineNo, err)
			}
			if ok {
				w.Write(t)
				w.WriteByte('\n')
				n++
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return n, rerr
		}
	}
	return n, w.Flush()
}

// auditTimes are the timestamps of an audit event.
type auditTimes struct {
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time `json:"stageTimestamp"`
}

// received is when kube-apiserver received the request (the stage's time when missing).
func (a auditTimes) received() time.Time {
	if a.RequestReceivedTimestamp.IsZero() {
		return a.StageTimestamp
	}
	return a.RequestReceivedTimestamp
}

func inSpan(t, start, end time.Time) bool { return !t.Before(start) && !t.After(end) }

// auditEventIn reports whether the audit event's request was received within [start, end].
func auditEventIn(line []byte, start, end time.Time) (bool, error) {
	var ev auditTimes
	if err := json.Unmarshal(line, &ev); err != nil {
		return false, fmt.Errorf("audit event: %w", err)
	}
	return inSpan(ev.received(), start, end), nil
}

// batchIn reports whether an EventList carries an event received within [start, end].
func batchIn(line []byte, start, end time.Time) (bool, error) {
	var list struct {
		Items []auditTimes `json:"items"`
	}
	if err := json.Unmarshal(line, &list); err != nil {
		return false, fmt.Errorf("audit event list: %w", err)
	}
	for _, ev := range list.Items {
		if inSpan(ev.received(), start, end) {
			return true, nil
		}
	}
	return false, nil
}

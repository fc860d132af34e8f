package e2e_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/e2e/bins"
	"github.com/kelemetry/kelemetry/e2e/record"
)

// auditEvent holds the fields of an audit.k8s.io/v1 Event the recorder test checks.
type auditEvent struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	AuditID    string `json:"auditID"`
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	ObjectRef  *struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"objectRef"`
}

// TestRecorder records the annotations scenario on a fresh cluster of its own and checks that
// every file is there, non-empty and decodes.
func TestRecorder(t *testing.T) {
	if skipReason != "" {
		t.Skip(skipReason)
	}
	binDir, err := bins.Dir()
	if err != nil {
		t.Fatal(err)
	}
	policy, err := filepath.Abs(filepath.Join("..", "deploy", "audit-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	const ns = "recorded"
	res, err := record.Run(t.Context(), record.Options{
		Scenario:        "annotations",
		OutDir:          out,
		Namespace:       ns,
		BinDir:          binDir,
		AuditPolicyFile: policy,
		Settle:          2 * time.Second,
		Logger:          slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatalf("record: %v", err)
	}
	t.Logf("recorded %+v", *res)

	for _, name := range []string{record.AuditFile, record.WebhookBatchesFile, record.EventsCoreV1File, record.EventsV1File, record.CommandsFile} {
		st, err := os.Stat(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() == 0 {
			t.Errorf("%s is empty", name)
		}
	}

	// Audit log: audit events, the scenario's among them (a create of the ConfigMap by the admin).
	audit := map[string]bool{} // auditID/stage
	inNamespace, configMapCreated := 0, false
	forEachLine(t, filepath.Join(out, record.AuditFile), func(line []byte) {
		var ev auditEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("%s: %v", record.AuditFile, err)
		}
		if ev.Kind != "Event" || ev.APIVersion != "audit.k8s.io/v1" || ev.AuditID == "" || ev.Stage == "" {
			t.Fatalf("%s: not an audit event: %s", record.AuditFile, line)
		}
		audit[ev.AuditID+"/"+ev.Stage] = true
		if ev.ObjectRef != nil && ev.ObjectRef.Namespace == ns {
			inNamespace++
			if ev.Verb == "create" && ev.ObjectRef.Resource == "configmaps" && ev.ObjectRef.Name == "web-config" {
				configMapCreated = true
			}
		}
	})
	if inNamespace == 0 || !configMapCreated {
		t.Errorf("%s: %d events in namespace %s, ConfigMap create seen: %v", record.AuditFile, inNamespace, ns, configMapCreated)
	}

	// Webhook batches: EventLists whose events are those of the audit log.
	batched := map[string]bool{}
	forEachLine(t, filepath.Join(out, record.WebhookBatchesFile), func(line []byte) {
		var list struct {
			Kind       string       `json:"kind"`
			APIVersion string       `json:"apiVersion"`
			Items      []auditEvent `json:"items"`
		}
		if err := json.Unmarshal(line, &list); err != nil {
			t.Fatalf("%s: %v", record.WebhookBatchesFile, err)
		}
		if list.Kind != "EventList" || list.APIVersion != "audit.k8s.io/v1" || len(list.Items) == 0 {
			t.Fatalf("%s: not an audit event list: %.300s", record.WebhookBatchesFile, line)
		}
		for _, ev := range list.Items {
			if key := ev.AuditID + "/" + ev.Stage; audit[key] {
				batched[key] = true
			}
		}
	})
	if len(batched) != len(audit) {
		t.Errorf("%d of the %d audit log events are in the webhook batches", len(batched), len(audit))
	}

	// Events: lists of Events of the namespace (the scheduler's at least).
	for _, name := range []string{record.EventsCoreV1File, record.EventsV1File} {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		var list struct {
			Kind  string `json:"kind"`
			Items []struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Namespace string `json:"namespace"`
				} `json:"metadata"`
			} `json:"items"`
		}
		if err := json.Unmarshal(b, &list); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if list.Kind != "List" || len(list.Items) == 0 {
			t.Fatalf("%s: kind %q, %d items", name, list.Kind, len(list.Items))
		}
		for _, it := range list.Items {
			if it.Kind != "Event" || it.Metadata.Namespace != ns {
				t.Errorf("%s: item of kind %q in namespace %q", name, it.Kind, it.Metadata.Namespace)
			}
		}
	}
}

// forEachLine calls f with each non-empty line of a file.
func forEachLine(t *testing.T, path string, f func(line []byte)) {
	t.Helper()
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
			f(line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

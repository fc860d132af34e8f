package record

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWebhookRecorder: the proxy appends each body as one line and forwards it unchanged to the
// same path, returning the upstream's answer.
func TestWebhookRecorder(t *testing.T) {
	var got []string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, r.URL.Path+" "+string(b))
		w.WriteHeader(http.StatusAccepted)
	}))
	defer upstream.Close()

	path := filepath.Join(t.TempDir(), "raw.jsonl")
	rec := newWebhookRecorder(path, slog.New(slog.NewTextHandler(io.Discard, nil)))
	via, err := rec.start(upstream.URL + "/audit/test")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(via, "/audit/test") || strings.HasPrefix(via, upstream.URL) {
		t.Fatalf("proxy URL %s", via)
	}
	bodies := []string{"{\n \"kind\": \"EventList\",\n \"items\": []\n}\n", `{"kind":"EventList","items":[{"auditID":"a"}]}`}
	for _, b := range bodies {
		resp, err := http.Post(via, "application/json", strings.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	n, err := rec.close(t.Context())
	if err != nil || n != 2 {
		t.Fatalf("close: %d bodies, %v", n, err)
	}
	if len(got) != 2 || got[0] != "/audit/test "+bodies[0] || got[1] != "/audit/test "+bodies[1] {
		t.Fatalf("upstream got %q", got)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"kind":"EventList","items":[]}` + "\n" + bodies[1] + "\n"
	if string(raw) != want {
		t.Fatalf("recorded %q, want %q", raw, want)
	}
}

// TestSlice: audit events and batches are kept by the time kube-apiserver received the request.
func TestSlice(t *testing.T) {
	dir := t.TempDir()
	start := time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC)
	end := start.Add(time.Minute)
	at := func(d time.Duration) string { return start.Add(d).Format("2006-01-02T15:04:05.000000Z07:00") }
	ev := func(id string, d time.Duration) string {
		return `{"kind":"Event","auditID":"` + id + `","requestReceivedTimestamp":"` + at(d) + `","stageTimestamp":"` + at(d+time.Millisecond) + `"}`
	}
	audit := strings.Join([]string{ev("before", -time.Second), ev("first", 0), ev("last", time.Minute), "", ev("after", time.Minute+time.Microsecond)}, "\n")
	if err := os.WriteFile(filepath.Join(dir, "audit.log"), []byte(audit), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := sliceLines(filepath.Join(dir, "audit.log"), filepath.Join(dir, "audit.jsonl"), func(l []byte) (bool, error) { return auditEventIn(l, start, end) })
	if err != nil || n != 2 {
		t.Fatalf("audit: %d lines, %v", n, err)
	}
	out, _ := os.ReadFile(filepath.Join(dir, "audit.jsonl"))
	if want := ev("first", 0) + "\n" + ev("last", time.Minute) + "\n"; string(out) != want {
		t.Fatalf("audit slice %q, want %q", out, want)
	}

	batch := func(evs ...string) string { return `{"kind":"EventList","items":[` + strings.Join(evs, ",") + `]}` }
	batches := strings.Join([]string{batch(ev("a", -2*time.Second)), batch(ev("b", -time.Second), ev("c", time.Second)), batch(ev("d", 2*time.Minute))}, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "raw.jsonl"), []byte(batches), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err = sliceLines(filepath.Join(dir, "raw.jsonl"), filepath.Join(dir, "batches.jsonl"), func(l []byte) (bool, error) { return batchIn(l, start, end) })
	if err != nil || n != 1 {
		t.Fatalf("batches: %d lines, %v", n, err)
	}
	out, _ = os.ReadFile(filepath.Join(dir, "batches.jsonl"))
	if !bytes.Contains(out, []byte(`"auditID":"c"`)) {
		t.Fatalf("batch slice %q", out)
	}
	if _, err := sliceLines(filepath.Join(dir, "raw.jsonl"), filepath.Join(dir, "x"), func(l []byte) (bool, error) { return auditEventIn([]byte("not json"), start, end) }); err == nil {
		t.Fatal("a line that is not JSON must fail")
	}
}

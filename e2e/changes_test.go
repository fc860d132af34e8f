package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestChangesLiveKubectlEdit: a `kubectl edit` of a Deployment on the real control plane appears
// in the live change feed (GET /api/changes?follow=1) as a person's patch with its diff, and in a
// listing of the last minutes afterwards, over the API and with `kubectl kelemetry changes`. The latency from kubectl's exit to the change's arrival
// is logged (the audit webhook batches for up to 1 s).
func TestChangesLiveKubectlEdit(t *testing.T) {
	needEnv(t)
	ns := newNamespace(t, "changes")
	s := session(t, ns)
	ctx := t.Context()
	if err := s.CreateDeployment(ctx, "web", "nginx:1.27", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WaitRolledOut(ctx, "web", 1); err != nil {
		t.Fatal(err)
	}

	// The live tail of people's writes in the namespace, with diffs.
	tailCtx, stop := context.WithCancel(ctx)
	defer stop()
	q := url.Values{"follow": {"1"}, "diff": {"1"}, "namespace": {ns}, "userKind": {"person"}, "since": {"1s"}}
	req, err := http.NewRequestWithContext(tailCtx, http.MethodGet, env.Kelemetry.URL+"/api/changes?"+q.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("follow: %s", resp.Status)
	}
	type change struct {
		Verb, User, UserKind string
		Object               struct{ Namespace, Name string }
		Diff                 []string
	}
	changes := make(chan change, 16)
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, ": backlog") {
				close(ready)
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				var c change
				if json.Unmarshal([]byte(data), &c) == nil {
					changes <- c
				}
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("the live tail sent no backlog")
	}

	// kubectl edit with an editor that scales the Deployment to 2.
	editor := filepath.Join(t.TempDir(), "editor.sh")
	if err := os.WriteFile(editor, []byte("#!/bin/sh\nsed -i 's/^  replicas: 1$/  replicas: 2/' \"$1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, kubectl, "edit", "deployment/web", "-n", ns)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Cluster.Kubeconfig, "KUBE_EDITOR="+editor, "EDITOR="+editor)
	t.Log("step: kubectl edit deployment/web (replicas 1 -> 2)")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl edit: %v: %s", err, out)
	}
	edited := time.Now()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case c := <-changes:
			if c.Object.Name != "web" || c.Verb != "patch" {
				continue
			}
			t.Logf("live: %s %s %s/%s after %s: %q", c.User, c.Verb, c.Object.Namespace, c.Object.Name, time.Since(edited).Round(time.Millisecond), c.Diff)
			if c.UserKind != "person" || !strings.Contains(strings.Join(c.Diff, "\n"), "spec.replicas 1 -> 2") {
				t.Fatalf("the edit's change: %+v", c)
			}
			stop()
			// The same change in a listing.
			var page struct {
				Data []struct {
					Verb  string
					Paths []string
				}
			}
			lq := url.Values{"namespace": {ns}, "name": {"web"}, "since": {"10m"}, "verb": {"patch"}}
			r, err := http.Get(env.Kelemetry.URL + "/api/changes?" + lq.Encode())
			if err != nil {
				t.Fatal(err)
			}
			defer r.Body.Close()
			if err := json.NewDecoder(r.Body).Decode(&page); err != nil {
				t.Fatal(err)
			}
			if len(page.Data) == 0 || !strings.Contains(strings.Join(page.Data[0].Paths, ","), "spec.replicas") {
				t.Fatalf("listing: %+v", page.Data)
			}
			// And in the terminal: kubectl kelemetry changes.
			out, err := exec.CommandContext(ctx, plugin, "changes", "-n", ns, "--since", "15m", "--user-kind", "person",
				"--server", env.Kelemetry.URL, "--kubeconfig", env.Cluster.Kubeconfig).CombinedOutput()
			if err != nil {
				t.Fatalf("kubectl kelemetry changes: %v: %s", err, out)
			}
			t.Logf("kubectl kelemetry changes -n %s --user-kind person:\n%s", ns, out)
			if !regexp.MustCompile(`(?m)^\S+\s+\S+\s+\S+\s+person\s+patch\s+deployments\.apps/web\s+` + ns + `\s+200\s+spec\.replicas$`).Match(out) {
				t.Errorf("the plugin's listing has no line of the edit")
			}
			return
		case <-deadline:
			t.Fatal("the edit did not reach the live tail within 30s")
		}
	}
}

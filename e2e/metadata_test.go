package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kelemetry/kelemetry/e2e/kapi"
)

// TestForegroundDeletionMetadataPatch: a Deployment deleted in the foreground waits on the
// foregroundDeletion finalizer until the garbage collector has deleted its ReplicaSet, then the
// garbage collector removes the finalizer with a patch through its metadata-only client, which
// kube-apiserver answers (and audits) with a PartialObjectMetadata. The Deployment's trace reads
// that response for the object's metadata: the patch is titled as the deletion it is, and its
// diff shows the finalizer removed.
func TestForegroundDeletionMetadataPatch(t *testing.T) {
	needEnv(t)
	ns := newNamespace(t, "foreground")
	s := session(t, ns)
	ctx := t.Context()
	const name = "web"
	if err := s.CreateDeployment(ctx, name, "nginx:1.27", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WaitRolledOut(ctx, name, 1); err != nil {
		t.Fatal(err)
	}
	foreground := metav1.DeletePropagationForeground
	t.Logf("step: delete deployment %s propagationPolicy=Foreground", name)
	if err := kube.AppsV1().Deployments(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &foreground}); err != nil {
		t.Fatal(err)
	}
	eventually(t, clusterTimeout, "the Deployment gone", func(ctx context.Context) error {
		_, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})

	// What kube-apiserver recorded: the garbage collector's patch, answered with metadata only.
	var recorded string
	eventually(t, 10*time.Second, "the garbage collector's metadata-only patch in the audit log", func(context.Context) error {
		var err error
		recorded, err = findMetadataPatch(env.Cluster.AuditLog, ns, name)
		return err
	})
	t.Logf("audited: the garbage collector's patch, answered with a PartialObjectMetadata (%d bytes)", len(recorded))

	traces(t, kapi.Query{Group: "apps", Resource: "deployments", Namespace: ns, Name: name}, "the Deployment's trace", func(o kapi.ObjectTraces) error {
		var titles []string
		for _, sp := range o.SourceSpans(kapi.SourceAudit) {
			if sp.Kind() != kapi.KindEvent {
				continue
			}
			titles = append(titles, sp.OperationName)
			if sp.Tag(kapi.TagUser) != garbageCollector || sp.Tag(kapi.TagVerb) != "patch" {
				continue
			}
			if code := sp.Tag(kapi.TagStatusCode); code != "" && !strings.HasPrefix(code, "2") {
				// Refused (a conflict, say) and retried by the collector: the retry is the
				// patch that removes the finalizer.
				continue
			}
			if !strings.HasSuffix(sp.OperationName, "(deleted: last finalizer removed)") {
				return fmt.Errorf("the garbage collector's patch is titled %q", sp.OperationName)
			}
			diffs := sp.LogMessages("diff")
			for _, d := range diffs {
				if strings.HasPrefix(d, "metadata.finalizers ") && strings.Contains(d, "foregroundDeletion") && strings.HasSuffix(d, "-> <none>") {
					return nil
				}
			}
			return fmt.Errorf("the garbage collector's patch has no finalizer removal in its diff: %q", diffs)
		}
		return fmt.Errorf("no patch by the garbage collector; have %q", titles)
	})
}

// findMetadataPatch returns the audit log's line of a patch of deployment ns/name by the garbage
// collector answered with a PartialObjectMetadata that has no finalizers left.
func findMetadataPatch(path, ns, name string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	refused := 0 // patches answered with a Status: refused (a conflict, say), which the collector retries
	for sc.Scan() {
		var e struct {
			Verb string `json:"verb"`
			User struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef struct {
				Resource, Namespace, Name, Subresource string
			} `json:"objectRef"`
			ResponseObject struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Finalizers        []string `json:"finalizers"`
					DeletionTimestamp string   `json:"deletionTimestamp"`
				} `json:"metadata"`
			} `json:"responseObject"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Verb != "patch" || e.User.Username != garbageCollector ||
			e.ObjectRef.Resource != "deployments" || e.ObjectRef.Namespace != ns || e.ObjectRef.Name != name {
			continue
		}
		if e.ResponseObject.Kind == "Status" {
			refused++
			continue
		}
		if e.ResponseObject.Kind != "PartialObjectMetadata" {
			return "", fmt.Errorf("the garbage collector's patch was answered with a %q, not a PartialObjectMetadata", e.ResponseObject.Kind)
		}
		if len(e.ResponseObject.Metadata.Finalizers) == 0 && e.ResponseObject.Metadata.DeletionTimestamp != "" {
			return sc.Text(), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("no such patch yet (%d refused with a Status)", refused)
}

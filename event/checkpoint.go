package event

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// checkpoint is where a Source resumes: the resourceVersion of the last Event list or watch
// position fully processed, and the Events already sent (UID, count, last occurrence and span
// start), so that what the API server sends again is not sent twice.
type checkpoint struct {
	ResourceVersion string      `json:"resourceVersion"`
	Seen            []seenEvent `json:"seen,omitempty"`
	Saved           time.Time   `json:"saved"`
}

// seenEvent is one Event already sent.
type seenEvent struct {
	UID   string    `json:"uid"`
	Count int32     `json:"count"`
	Last  time.Time `json:"last"`
	// Start is the start of the span last sent (the first occurrence seen in its window).
	Start time.Time `json:"start"`
}

// checkpointStore persists a Checkpoint.
type checkpointStore interface {
	// Load returns the stored checkpoint, or nil without error when there is none.
	Load(ctx context.Context) (*checkpoint, error)
	Save(ctx context.Context, cp *checkpoint) error
}

// fileCheckpoint stores the checkpoint as JSON in a local file, replaced atomically.
type fileCheckpoint struct{ Path string }

// Load reads the file; a missing file is no checkpoint.
func (f fileCheckpoint) Load(context.Context) (*checkpoint, error) {
	b, err := os.ReadFile(f.Path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load event checkpoint: %w", err)
	}
	var cp checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		return nil, fmt.Errorf("load event checkpoint %s: %w", f.Path, err)
	}
	return &cp, nil
}

// Save writes the file through a temporary file and a rename.
func (f fileCheckpoint) Save(_ context.Context, cp *checkpoint) error {
	b, err := json.Marshal(cp)
	if err != nil {
		return fmt.Errorf("save event checkpoint: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.Path), filepath.Base(f.Path)+".tmp*")
	if err != nil {
		return fmt.Errorf("save event checkpoint: %w", err)
	}
	_, werr := tmp.Write(b)
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("save event checkpoint: %w", err)
	}
	if err := os.Rename(tmp.Name(), f.Path); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("save event checkpoint: %w", err)
	}
	return nil
}

// configMapKey is the ConfigMap data key that holds the checkpoint JSON.
const configMapKey = "checkpoint.json"

// configMapCheckpoint stores the checkpoint in a ConfigMap (data key checkpoint.json), through a
// dynamic client's configmaps resource in the ConfigMap's namespace, e.g.
// dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns).
// A ConfigMap holds at most 1 MiB: keep SeenSize at a few thousand.
type configMapCheckpoint struct {
	Client dynamic.ResourceInterface
	Name   string
}

// Load reads the ConfigMap; a missing ConfigMap or key is no checkpoint.
func (c configMapCheckpoint) Load(ctx context.Context) (*checkpoint, error) {
	u, err := c.Client.Get(ctx, c.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load event checkpoint configmap %s: %w", c.Name, err)
	}
	data, _, _ := unstructured.NestedStringMap(u.Object, "data")
	raw, ok := data[configMapKey]
	if !ok {
		return nil, nil
	}
	var cp checkpoint
	if err := json.Unmarshal([]byte(raw), &cp); err != nil {
		return nil, fmt.Errorf("load event checkpoint configmap %s: %w", c.Name, err)
	}
	return &cp, nil
}

// Save creates or updates the ConfigMap, retrying once on a conflict.
func (c configMapCheckpoint) Save(ctx context.Context, cp *checkpoint) error {
	b, err := json.Marshal(cp)
	if err != nil {
		return fmt.Errorf("save event checkpoint: %w", err)
	}
	for attempt := 0; ; attempt++ {
		u, err := c.Client.Get(ctx, c.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			u = &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": c.Name},
				"data":     map[string]any{configMapKey: string(b)},
			}}
			_, err = c.Client.Create(ctx, u, metav1.CreateOptions{})
		case err == nil:
			if err = unstructured.SetNestedField(u.Object, string(b), "data", configMapKey); err == nil {
				_, err = c.Client.Update(ctx, u, metav1.UpdateOptions{})
			}
		}
		if err == nil {
			return nil
		}
		if attempt == 0 && (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)) {
			continue
		}
		return fmt.Errorf("save event checkpoint configmap %s: %w", c.Name, err)
	}
}

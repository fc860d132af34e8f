// Package leasefake is a minimal in-process API server for coordination.k8s.io/v1 Leases, for the
// tests of leader election and of the informer diff source that uses it.
package leasefake

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// Server is a minimal API server for coordination.k8s.io/v1 Leases with optimistic
// concurrency (a PUT with a stale resourceVersion gets 409), as kube-apiserver does: what the
// leader election relies on.
type Server struct {
	mu     sync.Mutex
	rv     int
	leases map[string]map[string]any // namespace/name -> object
}

// NewServer starts a Server for the test and returns a dynamic client of it.
func NewServer(t *testing.T) (*Server, dynamic.Interface) {
	t.Helper()
	s := &Server{leases: map[string]map[string]any{}}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	dyn, err := dynamic.NewForConfig(&rest.Config{Host: srv.URL, QPS: 1000, Burst: 1000})
	require.NoError(t, err)
	return s, dyn
}

func (s *Server) status(w http.ResponseWriter, code int, reason string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": "v1", "kind": "Status", "status": "Failure",
		"reason": reason, "code": code, "message": reason})
}

// ServeHTTP serves GET, POST and PUT of Leases.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	// /apis/coordination.k8s.io/v1/namespaces/{ns}/leases[/{name}]
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/apis/coordination.k8s.io/v1/namespaces/"), "/")
	if len(parts) < 2 || parts[1] != "leases" {
		s.status(w, http.StatusNotFound, "NotFound")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := parts[0]
	var obj map[string]any
	if r.Method == http.MethodPost || r.Method == http.MethodPut {
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &obj); err != nil {
			s.status(w, http.StatusBadRequest, "BadRequest")
			return
		}
	}
	switch {
	case r.Method == http.MethodGet && len(parts) == 3:
		if l, ok := s.leases[ns+"/"+parts[2]]; ok {
			_ = json.NewEncoder(w).Encode(l)
			return
		}
		s.status(w, http.StatusNotFound, "NotFound")
	case r.Method == http.MethodPost && len(parts) == 2:
		u := unstructured.Unstructured{Object: obj}
		key := ns + "/" + u.GetName()
		if _, ok := s.leases[key]; ok {
			s.status(w, http.StatusConflict, "AlreadyExists")
			return
		}
		s.put(key, u)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(u.Object)
	case r.Method == http.MethodPut && len(parts) == 3:
		u := unstructured.Unstructured{Object: obj}
		key := ns + "/" + parts[2]
		old, ok := s.leases[key]
		if !ok {
			s.status(w, http.StatusNotFound, "NotFound")
			return
		}
		if u.GetResourceVersion() != (&unstructured.Unstructured{Object: old}).GetResourceVersion() {
			s.status(w, http.StatusConflict, "Conflict")
			return
		}
		s.put(key, u)
		_ = json.NewEncoder(w).Encode(u.Object)
	default:
		s.status(w, http.StatusMethodNotAllowed, "MethodNotAllowed")
	}
}

func (s *Server) put(key string, u unstructured.Unstructured) {
	s.rv++
	u.SetResourceVersion(strconv.Itoa(s.rv))
	s.leases[key] = u.Object
}

// Holder is the holderIdentity of the Lease namespace/name, or "".
func (s *Server) Holder(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[key]
	if !ok {
		return ""
	}
	h, _, _ := unstructured.NestedString(l, "spec", "holderIdentity")
	return h
}

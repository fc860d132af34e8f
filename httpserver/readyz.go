package httpserver

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/kelemetry/kelemetry/health"
)

// anonymousKey marks a request to /readyz that carried no valid credentials: it learns the
// outcome of each check, not why one failed.
type anonymousKey struct{}

// isReadyz reports whether r is a GET or HEAD of /readyz or /readyz/{name}.
func isReadyz(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		(r.URL.Path == "/readyz" || strings.HasPrefix(r.URL.Path, "/readyz/"))
}

// readyz serves the readiness checks: GET /readyz runs every check (less those named by
// ?exclude=) and answers 200 "ok", or 503 with one line per check ("[+]name ok", "[-]name
// failed: reason") and "readyz check failed"; ?verbose lists the checks on success too.
// GET /readyz/{name} runs one check: 200 "ok", 503 "failed: reason", 404 for an unknown name.
type readyz struct{ checks []health.Check }

func (h readyz) register(m *http.ServeMux) {
	m.HandleFunc("GET /readyz", h.all)
	m.HandleFunc("GET /readyz/{name}", h.one)
}

func (h readyz) all(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	results := health.Run(r.Context(), h.checks, q["exclude"]...)
	failed := health.Failed(results) != nil
	_, verbose := q["verbose"]
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if failed {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	if !failed && !verbose {
		fmt.Fprintln(w, "ok")
		return
	}
	anonymous := r.Context().Value(anonymousKey{}) != nil
	for _, res := range results {
		switch {
		case res.Err == nil:
			fmt.Fprintf(w, "[+]%s ok\n", res.Name)
		case anonymous:
			fmt.Fprintf(w, "[-]%s failed\n", res.Name)
		default:
			fmt.Fprintf(w, "[-]%s failed: %s\n", res.Name, oneLine(res.Err.Error()))
		}
	}
	if failed {
		fmt.Fprintln(w, "readyz check failed")
		return
	}
	fmt.Fprintln(w, "readyz check passed")
}

func (h readyz) one(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	for _, c := range h.checks {
		if c.Name != name {
			continue
		}
		res := health.Run(r.Context(), []health.Check{c})[0]
		if res.Err == nil {
			fmt.Fprintln(w, "ok")
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		if r.Context().Value(anonymousKey{}) != nil {
			fmt.Fprintln(w, "failed")
			return
		}
		fmt.Fprintf(w, "failed: %s\n", oneLine(res.Err.Error()))
		return
	}
	http.Error(w, fmt.Sprintf("no readiness check %q", name), http.StatusNotFound)
}

// oneLine keeps a reason on its line of the answer.
func oneLine(s string) string { return strings.ReplaceAll(s, "\n", "; ") }

// anonymous marks r as carrying no credentials.
func anonymous(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), anonymousKey{}, true))
}

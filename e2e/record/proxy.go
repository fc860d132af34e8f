package record

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"sync"
	"time"
)

// webhookRecorder is an HTTP proxy between kube-apiserver's audit webhook and the all-in-one: it
// appends each request body (an audit.k8s.io/v1 EventList) as one line to a file, then forwards
// the request unchanged and returns the all-in-one's answer.
type webhookRecorder struct {
	path   string
	logger *slog.Logger

	mu       sync.Mutex
	file     *os.File
	requests int
	writeErr error

	srv  *http.Server
	done chan struct{}
}

func newWebhookRecorder(path string, logger *slog.Logger) *webhookRecorder {
	return &webhookRecorder{path: path, logger: logger}
}

// start listens on a free port of 127.0.0.1, forwarding to target (the all-in-one's webhook URL),
// and returns the URL kube-apiserver must post to (the same path on the proxy).
func (w *webhookRecorder) start(target string) (string, error) {
	tu, err := url.Parse(target)
	if err != nil {
		return "", fmt.Errorf("target %q: %w", target, err)
	}
	f, err := os.OpenFile(w.path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Close()
		return "", fmt.Errorf("listen: %w", err)
	}
	w.file = f
	upstream := &url.URL{Scheme: tu.Scheme, Host: tu.Host}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(upstream) // keeps the request's path (/audit/<cluster>) and query
		},
		ErrorHandler: func(rw http.ResponseWriter, r *http.Request, err error) {
			w.logger.Warn("audit webhook proxy: forward failed", "err", err)
			http.Error(rw, "kelemetry unreachable: "+err.Error(), http.StatusBadGateway)
		},
	}
	mux := http.NewServeMux()
	mux.Handle("/", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(rw, "read body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if r.Method == http.MethodPost {
			w.append(body)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		proxy.ServeHTTP(rw, r)
	}))
	w.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	w.done = make(chan struct{})
	go func() {
		defer close(w.done)
		if err := w.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			w.logger.Error("audit webhook proxy", "err", err)
		}
	}()
	via := *tu
	via.Host = ln.Addr().String()
	w.logger.Debug("audit webhook proxy listening", "url", via.String(), "target", target, "file", w.path)
	return via.String(), nil
}

// append writes one body as one line (compacted: a body is one JSON document).
func (w *webhookRecorder) append(body []byte) {
	var line bytes.Buffer
	if err := json.Compact(&line, body); err != nil {
		w.logger.Warn("audit webhook proxy: body is not JSON, recorded as is", "err", err)
		line.Reset()
		line.Write(bytes.ReplaceAll(bytes.TrimSpace(body), []byte("\n"), []byte(" ")))
	}
	line.WriteByte('\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	w.requests++
	if _, err := w.file.Write(line.Bytes()); err != nil && w.writeErr == nil {
		w.writeErr = fmt.Errorf("write %s: %w", w.path, err)
	}
}

// close stops the proxy and closes the file; it returns the number of bodies recorded.
func (w *webhookRecorder) close(ctx context.Context) (int, error) {
	var errs []error
	if w.srv != nil {
		if err := w.srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop the audit webhook proxy: %w", err))
		}
		<-w.done
		w.srv = nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.file != nil {
		errs = append(errs, w.writeErr, w.file.Close())
		w.file = nil
	}
	return w.requests, errors.Join(errs...)
}

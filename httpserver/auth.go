package httpserver

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/kelemetry/kelemetry/internal/clip"
	"github.com/kelemetry/kelemetry/internal/ratelog"
)

// AuditAuthConfig authenticates the senders of a listener that takes data: audit batches
// (kube-apiserver's webhook) or OTLP requests. A request passes with a client certificate signed
// by ClientCAFile (needs the listener's TLS) or with a bearer token of TokenFiles; with neither
// configured, the listener is open. Unauthenticated requests get 401 before their body is read.
// GET /healthz stays open.
type AuditAuthConfig struct {
	// ClientCAFile is a PEM bundle of the CAs whose client certificates are accepted (for the
	// audit webhook: the client-certificate of kube-apiserver's webhook kubeconfig).
	ClientCAFile string `yaml:"clientCAFile"`
	// TokenFiles hold accepted bearer tokens, one per line (blank lines and lines starting with
	// # are skipped); re-read when they change. kube-apiserver's audit webhook sends the token (or
	// tokenFile) of its webhook kubeconfig; OTLP exporters send "authorization: Bearer <token>".
	TokenFiles []string `yaml:"tokenFiles"`
}

// Enabled reports whether the webhook requires authentication.
func (c AuditAuthConfig) Enabled() bool { return c.ClientCAFile != "" || len(c.TokenFiles) > 0 }

// Validate reports missing or empty files, and a client CA without TLS.
func (c AuditAuthConfig) Validate(tls TLSConfig) error {
	var errs []error
	if c.ClientCAFile != "" {
		if !tls.Enabled() {
			errs = append(errs, errors.New("clientCAFile needs TLS on the listener (certFile, keyFile)"))
		}
		if _, err := loadCAPool(c.ClientCAFile); err != nil {
			errs = append(errs, fmt.Errorf("clientCAFile: %w", err))
		}
	}
	errs = append(errs, validateTokenFiles(c.TokenFiles))
	return errors.Join(errs...)
}

// APIAuthConfig authenticates the users of the API listener (query APIs, the UI's API calls,
// /metrics): a bearer token of TokenFiles, or an authenticating proxy in front (Proxy). With
// neither configured, the API is open. The UI's pages and static files stay open (they hold no
// data); so does GET /healthz, which then tells unauthenticated callers only the status.
type APIAuthConfig struct {
	// TokenFiles hold accepted bearer tokens, one per line (blank lines and lines starting with
	// # are skipped); re-read when they change.
	TokenFiles []string `yaml:"tokenFiles"`
	// Proxy trusts a user header set by an authenticating proxy.
	Proxy ProxyAuthConfig `yaml:"proxy"`
}

// ProxyAuthConfig trusts an authenticating proxy (oauth2-proxy, an ingress with external auth)
// the way Kubernetes' request-header authentication does: a request is the proxy's only when it
// comes with a client certificate signed by ClientCAFile (and, with AllowedNames, whose common
// name is listed); only then is its user header believed. The headers of any other client are
// ignored and removed.
type ProxyAuthConfig struct {
	// ClientCAFile is a PEM bundle of the CAs of the proxy's client certificate (needs the
	// listener's TLS).
	ClientCAFile string `yaml:"clientCAFile"`
	// AllowedNames are the accepted common names of the proxy's certificate (empty: any
	// certificate of ClientCAFile).
	AllowedNames []string `yaml:"allowedNames"`
	// UserHeaders name the user, the first one set wins (default X-Forwarded-User,
	// X-Auth-Request-User, X-Remote-User).
	UserHeaders []string `yaml:"userHeaders"`
}

// defaultUserHeaders are ProxyAuthConfig.UserHeaders by default.
var defaultUserHeaders = []string{"X-Forwarded-User", "X-Auth-Request-User", "X-Remote-User"}

// Enabled reports whether the API requires authentication.
func (c APIAuthConfig) Enabled() bool { return len(c.TokenFiles) > 0 || c.Proxy.ClientCAFile != "" }

// Validate reports missing or empty files, and a proxy CA without TLS.
func (c APIAuthConfig) Validate(tls TLSConfig) error {
	var errs []error
	p := c.Proxy
	if p.ClientCAFile != "" {
		if !tls.Enabled() {
			errs = append(errs, errors.New("proxy.clientCAFile needs TLS on the listener (certFile, keyFile)"))
		}
		if _, err := loadCAPool(p.ClientCAFile); err != nil {
			errs = append(errs, fmt.Errorf("proxy.clientCAFile: %w", err))
		}
	} else if len(p.AllowedNames) > 0 || len(p.UserHeaders) > 0 {
		errs = append(errs, errors.New("proxy.allowedNames and proxy.userHeaders need proxy.clientCAFile: a user header is trusted only from an authenticated proxy"))
	}
	for _, h := range p.UserHeaders {
		if strings.TrimSpace(h) == "" {
			errs = append(errs, errors.New("proxy.userHeaders: empty header name"))
		}
	}
	errs = append(errs, validateTokenFiles(c.TokenFiles))
	return errors.Join(errs...)
}

func validateTokenFiles(files []string) error {
	var errs []error
	for _, f := range files {
		toks, err := readTokens(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("tokenFiles: %w", err))
		} else if len(toks) == 0 {
			errs = append(errs, fmt.Errorf("tokenFiles: %s holds no token", f))
		}
	}
	return errors.Join(errs...)
}

// readTokens reads one token per line.
func readTokens(file string) ([][sha256.Size]byte, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read token file: %w", err)
	}
	var out [][sha256.Size]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, sha256.Sum256([]byte(line)))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read token file %s: %w", file, err)
	}
	return out, nil
}

// tokenSet holds the accepted tokens' hashes, re-reading the files at most every interval.
type tokenSet struct {
	files    []string
	interval time.Duration
	logger   *slog.Logger
	now      func() time.Time

	mu      sync.Mutex
	checked time.Time
	hashes  [][sha256.Size]byte
	lastErr string
}

func newTokenSet(files []string, interval time.Duration, logger *slog.Logger) (*tokenSet, error) {
	if len(files) == 0 {
		return nil, nil
	}
	if interval <= 0 {
		interval = DefaultReloadInterval
	}
	s := &tokenSet{files: files, interval: interval, logger: logger, now: time.Now}
	hashes, err := s.read()
	if err != nil {
		return nil, err
	}
	s.hashes, s.checked = hashes, s.now()
	return s, nil
}

func (s *tokenSet) read() ([][sha256.Size]byte, error) {
	var all [][sha256.Size]byte
	for _, f := range s.files {
		h, err := readTokens(f)
		if err != nil {
			return nil, err
		}
		all = append(all, h...)
	}
	return all, nil
}

// valid compares tok with every accepted token in constant time (of the token's length: the
// comparison is of SHA-256 digests).
func (s *tokenSet) valid(tok string) bool {
	s.mu.Lock()
	if now := s.now(); now.Sub(s.checked) >= s.interval {
		s.checked = now
		if h, err := s.read(); err != nil {
			if msg := err.Error(); msg != s.lastErr {
				s.logger.Warn("reload token files: keeping the previous tokens", "error", err)
				s.lastErr = msg
			}
		} else {
			s.hashes, s.lastErr = h, ""
		}
	}
	hashes := s.hashes
	s.mu.Unlock()
	sum := sha256.Sum256([]byte(tok))
	ok := 0
	for i := range hashes {
		ok |= subtle.ConstantTimeCompare(sum[:], hashes[i][:])
	}
	return ok == 1
}

// bearer returns the token of an Authorization: Bearer header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

type userKey struct{}

// user returns the user an authenticating proxy named for the request ("" when the request was
// not authenticated by a proxy).
func user(ctx context.Context) string {
	u, _ := ctx.Value(userKey{}).(string)
	return u
}

// authenticator guards one listener's handler.
type authenticator struct {
	listener string
	tokens   *tokenSet
	// clientCert accepts any verified client certificate (the listener's TLS verified it
	// against the configured CA, the only CA pool of that listener).
	clientCert bool
	// proxy: a verified client certificate (of the proxy CA) with an allowed name, plus a user
	// header.
	proxy        bool
	allowedNames []string
	userHeaders  []string
	public       func(r *http.Request) bool
	rejected     metric.Int64Counter
	logger       *slog.Logger
	// rejectLog rate-limits the lines of 401 answers: any peer can cause them.
	rejectLog ratelog.Limiter
	clock     func() time.Time // time.Now; tests move it
}

// Reasons of rejections (the reason attribute of kelemetry.http.auth.rejected).
const (
	reasonMissing = "missing"
	reasonInvalid = "invalid"
)

func newRejectedCounter(mp metric.MeterProvider) metric.Int64Counter {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	c, err := mp.Meter("github.com/kelemetry/kelemetry/httpserver").Int64Counter("kelemetry.http.auth.rejected",
		metric.WithDescription("Requests answered 401 because they carried no valid credentials, by listener and reason (missing, invalid)."))
	if err != nil {
		c, _ = noop.NewMeterProvider().Meter("").Int64Counter("kelemetry.http.auth.rejected")
	}
	return c
}

// verifiedPeer returns the common name of a verified client certificate.
func verifiedPeer(r *http.Request) (string, bool) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return "", false
	}
	return r.TLS.VerifiedChains[0][0].Subject.CommonName, true
}

// authenticate returns the request (with the proxy's user in its context) when its credentials
// are valid; reason says why not.
func (a *authenticator) authenticate(r *http.Request) (_ *http.Request, reason string) {
	reason = reasonMissing
	if a.proxy {
		if cn, ok := verifiedPeer(r); ok {
			if len(a.allowedNames) == 0 || slices.Contains(a.allowedNames, cn) {
				for _, h := range a.userHeaders {
					if u := strings.TrimSpace(r.Header.Get(h)); u != "" {
						return r.WithContext(context.WithValue(r.Context(), userKey{}, u)), ""
					}
				}
			}
			reason = reasonInvalid
		}
	}
	// A user header counts only from the proxy: never pass on one of another client.
	for _, h := range a.userHeaders {
		r.Header.Del(h)
	}
	if a.clientCert {
		if _, ok := verifiedPeer(r); ok {
			return r, ""
		}
	}
	if a.tokens != nil {
		if tok, ok := bearer(r); ok {
			if a.tokens.valid(tok) {
				return r, ""
			}
			reason = reasonInvalid
		}
	}
	return nil, reason
}

// wrap guards next; health answers unauthenticated GET /healthz with the bare status.
func (a *authenticator) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ar, reason := a.authenticate(r)
		switch {
		case reason == "":
			next.ServeHTTP(w, ar)
		case r.URL.Path == "/livez" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			live.ServeHTTP(w, r)
		case isReadyz(r):
			// Probes need no credentials; without them they learn which checks fail, not why.
			next.ServeHTTP(w, anonymous(r))
		case r.URL.Path == "/healthz" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			// Probes need no credentials; they learn only that the listener serves.
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]string{"status": "ok"})
		case a.public != nil && a.public(r):
			next.ServeHTTP(w, r)
		default:
			a.rejected.Add(r.Context(), 1, metric.WithAttributes(attribute.String("listener", a.listener), attribute.String("reason", reason)))
			if ok, suppressed := a.rejectLog.Allow(a.clock()); ok {
				a.logger.LogAttrs(r.Context(), slog.LevelWarn, "request refused: no valid credentials (401)",
					slog.String("listener", a.listener), slog.String("reason", reason), slog.String("method", r.Method),
					slog.String("path", clip.String(r.URL.Path, 128)), slog.String("remote", r.RemoteAddr),
					slog.Int("suppressedSinceLastLog", suppressed))
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="kelemetry"`)
			// The body is never read: close the connection rather than drain it.
			w.Header().Set("Connection", "close")
			http.Error(w, "unauthorized: send Authorization: Bearer <token> or a client certificate", http.StatusUnauthorized)
		}
	})
}

// uiPublic matches the web UI's pages and static files, which hold no data.
func uiPublic(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	p := r.URL.Path
	return p == "/" || p == "/search" || strings.HasPrefix(p, "/trace/") || strings.HasPrefix(p, "/static/")
}

// newSenderAuth builds the authenticator of a listener that takes data from senders (client
// certificates, bearer tokens): the audit and the OTLP listener. Nil when none is configured.
func newSenderAuth(listener string, c AuditAuthConfig, interval time.Duration, rejected metric.Int64Counter, logger *slog.Logger) (*authenticator, error) {
	if !c.Enabled() {
		return nil, nil
	}
	tokens, err := newTokenSet(c.TokenFiles, interval, logger)
	if err != nil {
		return nil, err
	}
	a := &authenticator{listener: listener, tokens: tokens, clientCert: c.ClientCAFile != "", rejected: rejected, logger: logger,
		rejectLog: ratelog.Limiter{Burst: peerLogBurst, Every: peerLogEvery}, clock: time.Now}
	a.initRejected()
	return a, nil
}

// newAPIAuth builds the API's authenticator (nil when none is configured).
func newAPIAuth(c APIAuthConfig, interval time.Duration, rejected metric.Int64Counter, logger *slog.Logger) (*authenticator, error) {
	if !c.Enabled() {
		return nil, nil
	}
	tokens, err := newTokenSet(c.TokenFiles, interval, logger)
	if err != nil {
		return nil, err
	}
	headers := c.Proxy.UserHeaders
	if len(headers) == 0 {
		headers = defaultUserHeaders
	}
	a := &authenticator{listener: "api", tokens: tokens, proxy: c.Proxy.ClientCAFile != "", allowedNames: c.Proxy.AllowedNames,
		userHeaders: headers, public: uiPublic, rejected: rejected, logger: logger,
		rejectLog: ratelog.Limiter{Burst: peerLogBurst, Every: peerLogEvery}, clock: time.Now}
	a.initRejected()
	return a, nil
}

// initRejected exports the rejections of a's listener at 0, each reason included, so that an
// increase() over them sees the first 401. A listener without credentials to check has none.
func (a *authenticator) initRejected() {
	for _, reason := range []string{reasonMissing, reasonInvalid} {
		a.rejected.Add(context.Background(), 0, metric.WithAttributes(attribute.String("listener", a.listener), attribute.String("reason", reason)))
	}
}

// caPool loads file, or returns nil for "".
func caPool(file string) (*x509.CertPool, error) {
	if file == "" {
		return nil, nil
	}
	return loadCAPool(file)
}

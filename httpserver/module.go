package httpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	healthpkg "github.com/kelemetry/kelemetry/health"

	"go.opentelemetry.io/otel/metric"
	"go.uber.org/fx"

	"github.com/kelemetry/kelemetry/telemetry"
)

// Defaults of Config.
const (
	DefaultAuditAddr = "127.0.0.1:8080"
	DefaultAPIAddr   = "127.0.0.1:16686"
)

// Config chooses the listen addresses, TLS and authentication. The zero value means the
// defaults: both listeners on localhost only, plain HTTP, no authentication.
type Config struct {
	// AuditAddr is the audit webhook's listener (default 127.0.0.1:8080).
	AuditAddr string `yaml:"auditAddr"`
	// APIAddr is the listener of the query APIs, the web UI, /metrics and /healthz (default
	// 127.0.0.1:16686).
	APIAddr string `yaml:"httpAddr"`
	// Timeouts bound slow clients on both listeners.
	Timeouts Timeouts `yaml:"timeouts"`
	// MaxConnections bounds the connections each listener keeps open at once (default
	// DefaultMaxConnections, 1024; negative: no limit). One more is reset as soon as it is
	// accepted, counted in kelemetry.listener.refused_connections and logged rate-limited; idle
	// connections are closed after Timeouts.Idle, silent ones after Timeouts.ReadHeader.
	MaxConnections int `yaml:"maxConnections"`
	// AuditTLS serves the audit listener over TLS.
	AuditTLS TLSConfig `yaml:"auditTLS"`
	// AuditAuth authenticates the audit webhook's clients.
	AuditAuth AuditAuthConfig `yaml:"auditAuth"`
	// APITLS serves the API listener over TLS.
	APITLS TLSConfig `yaml:"httpTLS"`
	// APIAuth authenticates the API listener's clients.
	APIAuth APIAuthConfig `yaml:"httpAuth"`
	// OTLPAddr is the OTLP receiver's listener (OTLP/gRPC and OTLP/HTTP on one port, e.g.
	// kube-apiserver's request traces, see package audit/apitrace). Empty (the default): no
	// listener, whatever registers OTLP handlers.
	OTLPAddr string `yaml:"otlpAddr"`
	// OTLPTLS serves the OTLP listener over TLS (gRPC then over HTTP/2 with TLS; without it,
	// gRPC's plaintext HTTP/2, which kube-apiserver's tracing exporter speaks).
	OTLPTLS TLSConfig `yaml:"otlpTLS"`
	// OTLPAuth authenticates the OTLP listener's clients: a client certificate of ClientCAFile,
	// or a bearer token (gRPC metadata or HTTP header "authorization: Bearer <token>").
	OTLPAuth AuditAuthConfig `yaml:"otlpAuth"`
	// ReloadInterval is how often, at most, certificate and token files are checked for changes
	// (default 5s).
	ReloadInterval time.Duration `yaml:"reloadInterval"`
}

// Validate reports unusable TLS or authentication settings: missing or empty files, a client CA
// without TLS, and per-listener settings of the audit listener when it shares the API's address.
func (c Config) Validate() error {
	c = c.WithDefaults()
	errs := []error{}
	var wrap func(prefix string, err error)
	wrap = func(prefix string, err error) {
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range joined.Unwrap() {
				wrap(prefix, e)
			}
		} else if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", prefix, err))
		}
	}
	wrap("auditTLS", c.AuditTLS.Validate())
	wrap("auditAuth", c.AuditAuth.Validate(c.AuditTLS))
	wrap("httpTLS", c.APITLS.Validate())
	wrap("httpAuth", c.APIAuth.Validate(c.APITLS))
	if c.AuditAddr == c.APIAddr && (c.AuditTLS.Enabled() || c.AuditAuth.Enabled()) {
		errs = append(errs, errors.New("auditTLS and auditAuth need their own listener: auditAddr equals httpAddr, whose httpTLS and httpAuth apply to both"))
	}
	if c.OTLPAddr != "" {
		wrap("otlpTLS", c.OTLPTLS.Validate())
		wrap("otlpAuth", c.OTLPAuth.Validate(c.OTLPTLS))
		_, port, err := net.SplitHostPort(c.OTLPAddr)
		if err != nil {
			errs = append(errs, fmt.Errorf("otlpAddr %q: %w", c.OTLPAddr, err))
		}
		if port != "0" && (c.OTLPAddr == c.AuditAddr || c.OTLPAddr == c.APIAddr) {
			errs = append(errs, fmt.Errorf("otlpAddr %s is the address of another listener: the OTLP receiver needs its own", c.OTLPAddr))
		}
	} else if c.OTLPTLS.Enabled() || c.OTLPAuth.Enabled() {
		errs = append(errs, errors.New("otlpTLS and otlpAuth are set but otlpAddr is empty: no OTLP listener"))
	}
	return errors.Join(errs...)
}

// WithDefaults returns c with empty addresses set to their defaults.
func (c Config) WithDefaults() Config {
	if c.AuditAddr == "" {
		c.AuditAddr = DefaultAuditAddr
	}
	if c.APIAddr == "" {
		c.APIAddr = DefaultAPIAddr
	}
	if c.ReloadInterval <= 0 {
		c.ReloadInterval = DefaultReloadInterval
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	return c
}

// Handler adds routes to a listener's mux. Its patterns must not collide with other handlers' on
// the same listener (http.ServeMux rejects duplicates).
type Handler interface {
	Register(mux *http.ServeMux)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(mux *http.ServeMux)

// Register calls f.
func (f HandlerFunc) Register(mux *http.ServeMux) { f(mux) }

// Route is a Handler serving one pattern.
func Route(pattern string, h http.Handler) Handler {
	return HandlerFunc(func(mux *http.ServeMux) { mux.Handle(pattern, h) })
}

// Value-group tags of the listeners.
const (
	AuditGroup = `group:"kelemetry.http.audit"`
	APIGroup   = `group:"kelemetry.http.api"`
	OTLPGroup  = `group:"kelemetry.http.otlp"`
)

// AsAuditHandler annotates a constructor whose result implements Handler so that its routes are
// served on the audit listener: fx.Provide(httpserver.AsAuditHandler(NewMyHandler)).
func AsAuditHandler(ctor any) any {
	return fx.Annotate(ctor, fx.As(new(Handler)), fx.ResultTags(AuditGroup))
}

// AsAPIHandler annotates a constructor whose result implements Handler so that its routes are
// served on the API listener.
func AsAPIHandler(ctor any) any {
	return fx.Annotate(ctor, fx.As(new(Handler)), fx.ResultTags(APIGroup))
}

// AsOTLPHandler annotates a constructor whose result implements Handler so that its routes are
// served on the OTLP listener (Config.OTLPAddr). A gRPC service is served there through
// grpc.Server's ServeHTTP: register the POST route of each of its methods.
func AsOTLPHandler(ctor any) any {
	return fx.Annotate(ctor, fx.As(new(Handler)), fx.ResultTags(OTLPGroup))
}

// Health answers GET /healthz on every listener. Without one in the graph, /healthz answers
// {"status":"ok"} once the listener serves. GET /livez always answers 200 {"status":"alive"}
// while the listener serves, whatever /healthz says: it is the liveness probe, since a restart
// does not cure what makes /healthz answer 503 (a full disk, a failed queue write, NATS out of
// reach) and the process recovers from those by itself.
type Health http.Handler

// Meter carries the meter provider of the listeners' metrics. Module takes it from
// telemetry.Settings; callers of New set it themselves.
type Meter struct {
	Provider metric.MeterProvider
}

// Deps are what the listeners serve and report with, given to New.
type Deps struct {
	// Logger logs the servers' errors (nil: slog.Default()).
	Logger *slog.Logger
	// Meter counts the listeners' connections and refusals (a nil provider: no metrics).
	Meter Meter
	// Audit, API and OTLP are the handlers of the audit, the API and the OTLP listener.
	Audit, API, OTLP []Handler
	// Health answers GET /healthz (nil: {"status":"ok"} once the listener serves).
	Health Health
	// Ready are the readiness checks GET /readyz runs (see package health).
	Ready []healthpkg.Check
}

// moduleParams are the fx inputs of newModule.
type moduleParams struct {
	fx.In

	Config Config            `optional:"true"`
	Logger *slog.Logger      `optional:"true"`
	Meter  Meter             `optional:"true"`
	Audit  []Handler         `group:"kelemetry.http.audit"`
	API    []Handler         `group:"kelemetry.http.api"`
	OTLP   []Handler         `group:"kelemetry.http.otlp"`
	Health Health            `optional:"true"`
	Ready  []healthpkg.Check `group:"kelemetry.readyz"`
}

// newModule builds the listeners for Module (New).
func newModule(p moduleParams) (*Servers, error) {
	return New(p.Config, Deps{Logger: p.Logger, Meter: p.Meter, Audit: p.Audit, API: p.API, OTLP: p.OTLP, Health: p.Health, Ready: p.Ready})
}

// Servers are the open listeners.
type Servers struct {
	audit, api, otlp *server
	started          []*server
	// readyReg reports the readiness checks as a gauge (nil without a meter).
	readyReg metric.Registration
}

// New builds the listeners that have handlers; none is opened before Start.
func New(config Config, p Deps) (*Servers, error) {
	cfg := config.WithDefaults()
	health := p.Health
	if health == nil {
		health = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]string{"status": "ok"})
		})
	}
	mux := func(hs ...[]Handler) (m *http.ServeMux, err error) {
		m = http.NewServeMux()
		defer func() {
			// http.ServeMux panics on a duplicate or malformed pattern: a wiring error.
			if r := recover(); r != nil {
				err = fmt.Errorf("httpserver: %v", r)
			}
		}()
		for _, h := range slices.Concat(hs...) {
			h.Register(m)
		}
		m.Handle("GET /healthz", health)
		m.Handle("GET /livez", live)
		readyz{checks: p.Ready}.register(m)
		return m, nil
	}
	log := p.Logger
	if log == nil {
		log = slog.Default()
	}
	if err := errors.Join(cfg.Validate(), healthpkg.Validate(p.Ready)); err != nil {
		return nil, fmt.Errorf("httpserver: %w", err)
	}
	rejected := newRejectedCounter(p.Meter.Provider)
	readyReg, err := registerReadyGauge(p.Meter.Provider, p.Ready)
	if err != nil {
		return nil, fmt.Errorf("httpserver: %w", err)
	}
	opts := options{Timeouts: cfg.Timeouts, MaxConnections: cfg.MaxConnections, Meter: p.Meter.Provider}
	s := &Servers{readyReg: readyReg}
	if cfg.OTLPAddr != "" && len(p.OTLP) > 0 {
		m, err := mux(p.OTLP)
		if err != nil {
			return nil, err
		}
		if s.otlp, err = newOTLPServer(cfg, opts, m, rejected, log); err != nil {
			return nil, err
		}
		s.started = append(s.started, s.otlp)
	}
	if cfg.AuditAddr == cfg.APIAddr {
		if len(p.Audit)+len(p.API) == 0 {
			return s, nil
		}
		m, err := mux(p.API, p.Audit)
		if err != nil {
			return nil, err
		}
		if s.api, err = newAPIServer(cfg, opts, m, rejected, log); err != nil {
			return nil, err
		}
		s.audit = s.api
		s.started = append(s.started, s.api)
		return s, nil
	}
	if len(p.Audit) > 0 {
		m, err := mux(p.Audit)
		if err != nil {
			return nil, err
		}
		if s.audit, err = newAuditServer(cfg, opts, m, rejected, log); err != nil {
			return nil, err
		}
		s.started = append(s.started, s.audit)
	}
	if len(p.API) > 0 {
		m, err := mux(p.API)
		if err != nil {
			return nil, err
		}
		if s.api, err = newAPIServer(cfg, opts, m, rejected, log); err != nil {
			return nil, err
		}
		s.started = append(s.started, s.api)
	}
	return s, nil
}

// loopback reports whether addr binds to a loopback address only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// newAuditServer builds the audit listener with its TLS and authentication.
func newAuditServer(cfg Config, opts options, h http.Handler, rejected metric.Int64Counter, log *slog.Logger) (*server, error) {
	return newSenderServer("audit", cfg.AuditAddr, cfg.AuditTLS, cfg.AuditAuth, cfg.ReloadInterval, opts, h, rejected, log,
		"the audit webhook accepts unauthenticated requests from the network: configure auditAuth (client certificates or tokens)")
}

// newOTLPServer builds the OTLP listener with its TLS and authentication. It speaks HTTP/1.1 and
// HTTP/2 (with TLS, or in plaintext with prior knowledge, as gRPC clients without TLS do).
func newOTLPServer(cfg Config, opts options, h http.Handler, rejected metric.Int64Counter, log *slog.Logger) (*server, error) {
	srv, err := newSenderServer("otlp", cfg.OTLPAddr, cfg.OTLPTLS, cfg.OTLPAuth, cfg.ReloadInterval, opts, h, rejected, log,
		"the OTLP receiver accepts unauthenticated requests from the network: configure otlpAuth (client certificates or tokens), or keep it on a network only the API servers reach")
	if err != nil {
		return nil, err
	}
	srv.srv.Protocols = new(http.Protocols)
	srv.srv.Protocols.SetHTTP1(true)
	srv.srv.Protocols.SetHTTP2(true)
	srv.srv.Protocols.SetUnencryptedHTTP2(true)
	return srv, nil
}

// newSenderServer builds a listener that takes data from senders (the audit webhook, the OTLP
// receiver): client certificates or bearer tokens, and TLS; open says what is logged when it is
// open to the network without authentication.
func newSenderServer(name, addr string, tlsCfg TLSConfig, authCfg AuditAuthConfig, reload time.Duration, opts options,
	h http.Handler, rejected metric.Int64Counter, log *slog.Logger, open string,
) (*server, error) {
	auth, err := newSenderAuth(name, authCfg, reload, rejected, log)
	if err != nil {
		return nil, fmt.Errorf("%s listener: %w", name, err)
	}
	if auth != nil {
		h = auth.wrap(h)
	} else if !loopback(addr) {
		log.Warn(open, "addr", addr)
	}
	srv := newServer(name, addr, h, opts, log)
	if tlsCfg.Enabled() {
		pool, err := caPool(authCfg.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("%s listener: %w", name, err)
		}
		tc, err := serverTLS(tlsCfg, pool, reload, log.With("server", name))
		if err != nil {
			return nil, fmt.Errorf("%s listener: %w", name, err)
		}
		srv.setTLS(tc)
	}
	return srv, nil
}

// newAPIServer builds the API listener with its TLS and authentication.
func newAPIServer(cfg Config, opts options, h http.Handler, rejected metric.Int64Counter, log *slog.Logger) (*server, error) {
	auth, err := newAPIAuth(cfg.APIAuth, cfg.ReloadInterval, rejected, log)
	if err != nil {
		return nil, fmt.Errorf("api listener: %w", err)
	}
	if auth != nil {
		h = auth.wrap(h)
	} else if !loopback(cfg.APIAddr) {
		log.Warn("the API serves audit bodies to unauthenticated clients from the network: configure httpAuth (tokens or an authenticating proxy)", "addr", cfg.APIAddr)
	}
	srv := newServer("api", cfg.APIAddr, h, opts, log)
	if cfg.APITLS.Enabled() {
		pool, err := caPool(cfg.APIAuth.Proxy.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("api listener: %w", err)
		}
		tc, err := serverTLS(cfg.APITLS, pool, cfg.ReloadInterval, log.With("server", "api"))
		if err != nil {
			return nil, fmt.Errorf("api listener: %w", err)
		}
		srv.setTLS(tc)
	}
	return srv, nil
}

// Start opens every listener; if one cannot be opened, the others are closed again.
func (s *Servers) Start(ctx context.Context) error {
	for i, srv := range s.started {
		if err := srv.Start(ctx); err != nil {
			for _, open := range s.started[:i] {
				_ = open.Stop(ctx)
			}
			return err
		}
	}
	return nil
}

// Stop shuts every listener down, waiting for running requests until ctx ends.
func (s *Servers) Stop(ctx context.Context) error {
	var errs []error
	for _, srv := range slices.Backward(s.started) {
		errs = append(errs, srv.Stop(ctx))
	}
	if s.readyReg != nil {
		errs = append(errs, s.readyReg.Unregister())
		s.readyReg = nil
	}
	return errors.Join(errs...)
}

// AuditAddr is the bound address of the audit listener ("" when it has no handlers).
func (s *Servers) AuditAddr() string {
	if s.audit == nil {
		return ""
	}
	return s.audit.Addr()
}

// OTLPAddr is the bound address of the OTLP listener ("" when it is off or has no handlers).
func (s *Servers) OTLPAddr() string {
	if s.otlp == nil {
		return ""
	}
	return s.otlp.Addr()
}

// APIAddr is the bound address of the API listener ("" when it has no handlers).
func (s *Servers) APIAddr() string {
	if s.api == nil {
		return ""
	}
	return s.api.Addr()
}

// telemetryParams are what Module takes from package telemetry (telemetry.Module); both are
// optional.
type telemetryParams struct {
	fx.In

	Settings   telemetry.Settings    `optional:"true"`
	Prometheus *telemetry.Prometheus `optional:"true"`
}

// telemetryResult are the listeners' meter provider and the API listener's GET /metrics.
type telemetryResult struct {
	fx.Out

	Meter   Meter
	Metrics []Handler `group:"kelemetry.http.api,flatten"`
}

// fromTelemetry gives the listeners the application's meter provider and, when telemetry.Module
// built the Prometheus provider, serves it at GET /metrics on the API listener (with the API's
// TLS and authentication, like every API route).
func fromTelemetry(p telemetryParams) telemetryResult {
	r := telemetryResult{Meter: Meter{Provider: p.Settings.MeterProvider}}
	if p.Prometheus != nil {
		r.Metrics = []Handler{Route("GET /metrics", p.Prometheus.Handler)}
	}
	return r
}

// Module opens the listeners with the application and closes them (gracefully) when it stops.
// Listeners start after every module they serve was constructed, and stop first. With
// telemetry.Module's Prometheus provider in the application, the API listener serves it at
// GET /metrics; the listeners count with telemetry.Settings' meter provider.
var Module = fx.Module("httpserver",
	fx.Provide(fromTelemetry),
	fx.Provide(fx.Annotate(newModule, fx.OnStart(func(ctx context.Context, s *Servers) error { return s.Start(ctx) }),
		fx.OnStop(func(ctx context.Context, s *Servers) error { return s.Stop(ctx) }))),
	fx.Invoke(func(*Servers) {}),
)

// live answers GET /livez: the process serves.
var live = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"alive"}` + "\n"))
})

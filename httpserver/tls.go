package httpserver

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/kelemetry/kelemetry/internal/tlsfiles"
)

// TLSConfig serves a listener over TLS (1.2 or newer). The certificate and key files are read
// again when they change (checked at most every ReloadInterval, on the next handshake), so a
// rotated certificate is served without a restart; a pair that fails to load is logged and the
// previous one kept. The zero value serves plain HTTP.
type TLSConfig struct {
	// CertFile is the PEM certificate (chain) of the listener.
	CertFile string `yaml:"certFile"`
	// KeyFile is the PEM private key of CertFile.
	KeyFile string `yaml:"keyFile"`
}

// DefaultReloadInterval is how often, at most, certificate and token files are checked for
// changes.
const DefaultReloadInterval = 5 * time.Second

// Enabled reports whether the listener serves TLS.
func (c TLSConfig) Enabled() bool { return c.CertFile != "" || c.KeyFile != "" }

// Validate reports a missing file, a half-configured pair or a pair that does not load.
func (c TLSConfig) Validate() error {
	if !c.Enabled() {
		return nil
	}
	if c.CertFile == "" || c.KeyFile == "" {
		return errors.New("certFile and keyFile must be set together")
	}
	if _, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile); err != nil {
		return fmt.Errorf("certificate %s, key %s: %w", c.CertFile, c.KeyFile, err)
	}
	return nil
}

// certReloader hands out the certificate of a listener, re-reading its files when they changed.
type certReloader struct {
	certFile, keyFile string
	interval          time.Duration
	logger            *slog.Logger
	now               func() time.Time

	mu              sync.Mutex
	checked         time.Time
	certPEM, keyPEM []byte
	cert            *tls.Certificate
	lastErr         string
}

func newCertReloader(c TLSConfig, interval time.Duration, logger *slog.Logger) (*certReloader, error) {
	if interval <= 0 {
		interval = DefaultReloadInterval
	}
	r := &certReloader{certFile: c.CertFile, keyFile: c.KeyFile, interval: interval, logger: logger, now: time.Now}
	if err := r.load(); err != nil {
		return nil, err
	}
	r.checked = r.now()
	return r, nil
}

// load reads both files and replaces the certificate when their content changed.
func (r *certReloader) load() error {
	certPEM, err := os.ReadFile(r.certFile)
	if err != nil {
		return fmt.Errorf("read certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(r.keyFile)
	if err != nil {
		return fmt.Errorf("read key: %w", err)
	}
	if r.cert != nil && bytes.Equal(certPEM, r.certPEM) && bytes.Equal(keyPEM, r.keyPEM) {
		return nil
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("certificate %s, key %s: %w", r.certFile, r.keyFile, err)
	}
	r.cert, r.certPEM, r.keyPEM = &cert, certPEM, keyPEM
	return nil
}

// GetCertificate implements tls.Config.GetCertificate.
func (r *certReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := r.now(); now.Sub(r.checked) >= r.interval {
		r.checked = now
		old := r.cert
		if err := r.load(); err != nil {
			// A rotation may be half written (certificate before key): keep serving the old pair.
			if msg := err.Error(); msg != r.lastErr {
				r.logger.Warn("reload TLS certificate: keeping the previous one", "error", err)
				r.lastErr = msg
			}
		} else {
			r.lastErr = ""
			if r.cert != old {
				r.logger.Info("reloaded TLS certificate", "cert", r.certFile)
			}
		}
	}
	return r.cert, nil
}

// loadCAPool reads a PEM bundle of CA certificates.
func loadCAPool(file string) (*x509.CertPool, error) { return tlsfiles.LoadCAPool(file) }

// serverTLS builds the tls.Config of a listener: its reloaded certificate, TLS 1.2 at least, and,
// when clientCAs is set, client certificates verified against it if the client presents one (the
// authentication layer decides whether one is required, so that it can answer 401 and count).
func serverTLS(c TLSConfig, clientCAs *x509.CertPool, interval time.Duration, logger *slog.Logger) (*tls.Config, error) {
	r, err := newCertReloader(c, interval, logger)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: r.GetCertificate,
	}
	if clientCAs != nil {
		cfg.ClientCAs = clientCAs
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}

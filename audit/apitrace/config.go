package apitrace

import (
	"errors"
	"fmt"
	"time"
)

// Defaults of Config.
const (
	defaultWait            = 2 * time.Minute
	defaultMaxPendingBytes = 64 << 20
	defaultMaxRequests     = 200_000
	defaultMaxRequestBytes = 16 << 20
	// maxAuditIDLength is how much of an audit ID kube-apiserver puts in its spans.
	maxAuditIDLength = 64
)

// Config configures the join of kube-apiserver's request traces. The zero value is off.
type Config struct {
	// Enabled turns the receiver (served on httpserver.Config.OTLPAddr) and the join on.
	Enabled bool `yaml:"enabled"`
	// Wait is how long a request's spans wait for their audit event, and an audit event for its
	// request's spans (default 2m: kube-apiserver batches spans for up to 5s and audit events for
	// up to 30s by default; its audit webhook retries for longer). Spans still unmatched then are
	// counted as expired and dropped.
	Wait time.Duration `yaml:"wait"`
	// MaxPendingBytes bounds the spans held while they wait (default 64 MiB): beyond it the
	// receiver answers 429 / RESOURCE_EXHAUSTED, and the sender retries later.
	MaxPendingBytes int64 `yaml:"maxPendingBytes"`
	// MaxRequests bounds the requests (audit IDs) remembered while they wait (default 200,000):
	// beyond it the oldest is forgotten and counted (result "evicted").
	MaxRequests int `yaml:"maxRequests"`
	// MaxRequestBytes bounds one OTLP request's body (default 16 MiB; 413 / RESOURCE_EXHAUSTED
	// beyond it). Compressed bodies are bounded after decompression.
	MaxRequestBytes int `yaml:"maxRequestBytes"`
	// Replay lists files of recorded OTLP trace requests, read once at start-up: one
	// ExportTraceServiceRequest per line in OTLP/JSON (as Dump writes them, and as the
	// OpenTelemetry Collector's file exporter does).
	Replay []string `yaml:"replay"`
	// Dump appends every request the receiver accepted to this file, one OTLP/JSON line each (for
	// bug reports and Replay); it stops at DumpMaxBytes. Empty: no dump.
	Dump string `yaml:"dump"`
	// DumpMaxBytes bounds the dump file (default 256 MiB); requests beyond it are counted, not
	// written.
	DumpMaxBytes int64 `yaml:"dumpMaxBytes"`
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Wait <= 0 {
		c.Wait = defaultWait
	}
	if c.MaxPendingBytes <= 0 {
		c.MaxPendingBytes = defaultMaxPendingBytes
	}
	if c.MaxRequests <= 0 {
		c.MaxRequests = defaultMaxRequests
	}
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = defaultMaxRequestBytes
	}
	if c.DumpMaxBytes <= 0 {
		c.DumpMaxBytes = 256 << 20
	}
	return c
}

// Validate reports negative limits and settings that need the join on.
func (c Config) Validate() error {
	var errs []error
	if c.Wait < 0 {
		errs = append(errs, fmt.Errorf("apiserverTraces.wait %s is negative", c.Wait))
	}
	if c.MaxPendingBytes < 0 || c.MaxRequests < 0 || c.MaxRequestBytes < 0 || c.DumpMaxBytes < 0 {
		errs = append(errs, errors.New("apiserverTraces: limits must not be negative"))
	}
	if !c.Enabled && (len(c.Replay) > 0 || c.Dump != "") {
		errs = append(errs, errors.New("apiserverTraces: replay and dump need enabled: true"))
	}
	return errors.Join(errs...)
}

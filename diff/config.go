package diff

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Defaults for StreamConfig.
const (
	defaultCacheSize        = 20_000
	defaultCacheBytes       = 32 << 20
	defaultMaxBodyBytes     = 256 << 10
	defaultMaxChanges       = 100
	defaultMaxValueBytes    = 512
	defaultMaxSnapshotBytes = 64 << 10
)

// Attribute keys of the logs a Stream writes.
const (
	// AttrPath, AttrOp, AttrOld and AttrNew describe one change (AttrOld and AttrNew hold JSON,
	// left out when absent or longer than 4*MaxValueBytes; then AttrTruncated is "true").
	AttrPath      = "kelemetry.diff.path"
	AttrOp        = "kelemetry.diff.op"
	AttrOld       = "kelemetry.diff.old"
	AttrNew       = "kelemetry.diff.new"
	AttrRedacted  = "kelemetry.diff.redacted"
	AttrTruncated = "kelemetry.diff.truncated"
	// AttrBaseRV is the resourceVersion the diff was computed against (an event attribute).
	AttrBaseRV = "kelemetry.diff.base_resource_version"
	// AttrSnapshotKind is "creation" or "deletion"; AttrSnapshotRV the snapshot's
	// resourceVersion; AttrSnapshotSource "response" (the request's response) or "last_seen"
	// (the last version seen before a delete that did not return the object).
	AttrSnapshotKind   = "kelemetry.snapshot.kind"
	AttrSnapshotRV     = "kelemetry.snapshot.resource_version"
	AttrSnapshotSource = "kelemetry.snapshot.source"
)

// Values of AttrOp besides the Op values, on notes that carry no change.
const (
	OpNone        = "none"        // the write changed nothing (no-op) or only bookkeeping fields
	OpUnavailable = "unavailable" // no diff could be computed; the message says why
	OpTruncated   = "truncated"   // more changes than MaxChanges; the message says how many
)

// StreamConfig configures a Stream. The zero value means defaults.
type StreamConfig struct {
	// Disabled turns the audit-stream diff off.
	Disabled bool `yaml:"disabled"`
	// CacheSize bounds the objects whose last version is kept (LRU, default 20,000). Memory is
	// about CacheSize times the average object size without managedFields, up to MaxBytes.
	CacheSize int `yaml:"cacheSize"`
	// MaxBytes bounds the estimated heap of the kept versions (default 32 MiB): each is counted
	// as its stripped object's encoded size plus its structural index and a fixed overhead, and
	// the least recently used versions are evicted beyond it
	// (kelemetry_diff_stream_evictions_total, reason bytes; reason objects for CacheSize). It must
	// be at least MaxBodyBytes.
	MaxBytes int64 `yaml:"maxBytes"`
	// MaxBodyBytes: larger objects are not kept (default 256 KiB); their writes get no diff.
	MaxBodyBytes int `yaml:"maxBodyBytes"`
	// MaxChanges bounds the diff logs of one write (default 100); one more log counts the rest.
	MaxChanges int `yaml:"maxChanges"`
	// MaxValueBytes cuts each value in a diff line (default 512).
	MaxValueBytes int `yaml:"maxValueBytes"`
	// MaxSnapshotBytes: larger snapshots are replaced by a note (default 64 KiB).
	MaxSnapshotBytes int `yaml:"maxSnapshotBytes"`
	// RepeatDeletionSnapshots writes a full deletion snapshot on every delete that returns the
	// object. By default only the first one (deletion start: graceful deletion, finalizers) is
	// full; later deletes of the same object (the final removal) get the changes since it.
	RepeatDeletionSnapshots bool `yaml:"repeatDeletionSnapshots"`
	// Compare configures the comparison (ignored fields, merge keys, redaction).
	Compare Options `yaml:"compare"`
}

// WithDefaults returns c with zero fields set to their defaults.
func (c StreamConfig) WithDefaults() StreamConfig {
	if c.CacheSize == 0 {
		c.CacheSize = defaultCacheSize
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = defaultCacheBytes
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = defaultMaxBodyBytes
	}
	if c.MaxChanges == 0 {
		c.MaxChanges = defaultMaxChanges
	}
	if c.MaxValueBytes == 0 {
		c.MaxValueBytes = defaultMaxValueBytes
	}
	if c.MaxSnapshotBytes == 0 {
		c.MaxSnapshotBytes = defaultMaxSnapshotBytes
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c StreamConfig) Validate() error {
	if c.CacheSize < 0 || c.MaxBytes < 0 || c.MaxBodyBytes < 0 || c.MaxChanges < 0 || c.MaxValueBytes < 0 || c.MaxSnapshotBytes < 0 {
		return errors.New("diff stream: sizes must not be negative")
	}
	if d := c.WithDefaults(); d.MaxBytes < int64(d.MaxBodyBytes) {
		return fmt.Errorf("diff stream: maxBytes %d is less than maxBodyBytes %d: the largest kept object would not fit", d.MaxBytes, d.MaxBodyBytes)
	}
	return c.Compare.Validate()
}

// DefaultIgnore are the field paths left out of comparisons when Options.Ignore is nil: fields
// the API server rewrites on every write.
var DefaultIgnore = []string{"metadata.managedFields", "metadata.resourceVersion", "metadata.generation"}

// Options configure comparisons. The zero value means defaults.
//
// Paths are written as in Change.Path with every list item written "[]" (or "[*]"), e.g.
// "spec.template.spec.containers[].env" or `metadata.annotations["example.com/token"]`. A path
// covers everything below it.
type Options struct {
	// Ignore lists paths never reported. Nil means DefaultIgnore; an empty non-nil list ignores
	// nothing.
	Ignore []string `yaml:"ignore"`
	// MergeKeys adds or overrides list merge keys. A key is a list's path
	// ("spec.template.spec.containers") or a bare field name ("containers"); the value lists the
	// candidate keys in order of preference. An empty value makes the list positional.
	MergeKeys map[string][]string `yaml:"mergeKeys"`
	// Redact lists redaction rules, on top of the built-in one for Secrets' data, stringData and
	// kubectl's last-applied-configuration annotation.
	Redact []RedactRule `yaml:"redact"`
	// MaxLCS bounds the alignment table of unkeyed lists (default 65536 cells).
	MaxLCS int `yaml:"maxLCS"`
}

// RedactRule hides the values of matching fields of matching resources: they are replaced by
// "<redacted:HASH>", where HASH is a keyed hash (the key is random per process) that only tells
// whether two values are equal.
type RedactRule struct {
	// Resource is "resource" (core group) or "group/resource"; empty means every resource.
	Resource string `yaml:"resource"`
	// Paths are hidden with everything below them.
	Paths []string `yaml:"paths"`
	// PathRegex hides fields whose full path (as in Change.Path) matches.
	PathRegex string `yaml:"pathRegex"`
}

// Validate reports options that cannot work.
func (o Options) Validate() error {
	var errs []error
	for _, p := range o.Ignore {
		if p == "" {
			errs = append(errs, errors.New("diff: empty ignore path"))
		}
	}
	for _, r := range o.Redact {
		if _, err := ParseResource(r.Resource); err != nil {
			errs = append(errs, err)
		}
		if len(r.Paths) == 0 && r.PathRegex == "" {
			errs = append(errs, fmt.Errorf("diff: redaction rule for %q has neither paths nor pathRegex", r.Resource))
		}
		if r.PathRegex != "" {
			if _, err := regexp.Compile(r.PathRegex); err != nil {
				errs = append(errs, fmt.Errorf("diff: redaction rule for %q: %w", r.Resource, err))
			}
		}
	}
	if o.MaxLCS < 0 {
		errs = append(errs, errors.New("diff: maxLCS is negative"))
	}
	return errors.Join(errs...)
}

// Resource names the resource an object belongs to; it selects redaction rules. The zero value
// means unknown: Secrets are then recognised by their kind.
type Resource struct {
	Group    string
	Resource string
}

// ParseResource reads "resource" (the core group) or "group/resource"; "" is the zero Resource.
func ParseResource(s string) (Resource, error) {
	if s == "" {
		return Resource{}, nil
	}
	group, res, found := strings.Cut(s, "/")
	if !found {
		group, res = "", s
	}
	if res == "" || strings.Contains(res, "/") || (found && group == "") {
		return Resource{}, fmt.Errorf("diff: resource %q is not \"resource\" or \"group/resource\"", s)
	}
	return Resource{Group: group, Resource: res}, nil
}

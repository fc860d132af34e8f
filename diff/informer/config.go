package informer

import (
	"github.com/kelemetry/kelemetry/diff"
	"github.com/kelemetry/kelemetry/diff/changes"
	informerimpl "github.com/kelemetry/kelemetry/internal/informer"
)

// Config configures the informer of each watched cluster (ModuleConfig.Informer). The zero value
// means defaults.
type Config struct {
	// Resources lists the watched resources, "resource" (core group) or "group/resource", at the
	// server's preferred version. Empty means every resource discovery lists with the list and
	// watch verbs, minus Exclude.
	Resources []string `yaml:"resources"`
	// Exclude lists resources never watched. Nil means events, events.k8s.io/events and coordination.k8s.io/leases.
	Exclude []string `yaml:"exclude"`
	// MaxObjects bounds the objects whose last version is kept, over all resources (default
	// 200,000); MaxBytes their total size (default 512 MiB); MaxObjectBytes the size of one
	// (default 256 KiB). Objects that do not fit get no diffs and are counted as dropped.
	MaxObjects     int   `yaml:"maxObjects"`
	MaxBytes       int64 `yaml:"maxBytes"`
	MaxObjectBytes int   `yaml:"maxObjectBytes"`
	// PageSize is the list page size (default 500).
	PageSize int64 `yaml:"pageSize"`
	// Cache bounds the change cache the Informer writes.
	Cache changes.CacheConfig `yaml:"cache"`
	// Compare configures the comparison (ignored fields, merge keys, redaction).
	Compare diff.Options `yaml:"compare"`
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error { return informerimpl.Config(c).Validate() }

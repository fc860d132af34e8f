package kube

import (
	"time"

	"github.com/kelemetry/kelemetry/aggregator"
)

// SetClock replaces the cache's clock (tests only).
func (c *ObjectCache) SetClock(now func() time.Time) { c.now = now }

// SetClock replaces the mapper's clock (tests only).
func (m *DiscoveryMapper) SetClock(now func() time.Time) { m.now = now }

// InflightWaiters is the number of callers waiting on the running GET of ref (0 when none runs),
// for tests that wait until concurrent misses have piled up.
func InflightWaiters(c *ObjectCache, ref aggregator.ObjectRef) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if call := c.inflight[ref.Key()]; call != nil {
		return call.waiters
	}
	return 0
}

// Names the external tests use; the package does not export them.
const (
	DefaultDiscoveryMaxAge    = defaultDiscoveryMaxAge
	DefaultMinRefreshInterval = defaultMinRefreshInterval
	DefaultObjectCacheSize    = defaultObjectCacheSize
)

var (
	ErrIncompleteRef = errIncompleteRef
	ErrInvalidKind   = errInvalidKind
	GuessResource    = guessResource
	NewClusters      = newClusters
	NewRESTClusters  = newRESTClusters
	RestConfig       = restConfig
)

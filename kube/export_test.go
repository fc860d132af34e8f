package kube

import "time"

// SetClock replaces the cache's clock (tests only).
func (c *ObjectCache) SetClock(now func() time.Time) { c.now = now }

// SetClock replaces the mapper's clock (tests only).
func (m *DiscoveryMapper) SetClock(now func() time.Time) { m.now = now }

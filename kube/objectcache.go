package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/internal/loop"
	"github.com/kelemetry/kelemetry/internal/ratelog"
	"github.com/kelemetry/kelemetry/telemetry"
)

// meterScope is the instrumentation scope of the package's metrics.
const meterScope = "github.com/kelemetry/kelemetry/kube"

// ObjectGetter returns the current body of an object, as JSON.
type ObjectGetter interface {
	// Get returns the object's JSON body, or an error wrapping ErrObjectNotFound when the object
	// does not exist. The caller must not modify the returned bytes.
	Get(ctx context.Context, ref aggregator.ObjectRef) (json.RawMessage, error)
}

// Clusters gives the dynamic client of each cluster by name. RESTClusters implements it.
type Clusters interface {
	// Dynamic returns the cluster's client, or an error wrapping ErrUnknownCluster.
	Dynamic(cluster string) (dynamic.Interface, error)
}

var (
	// ErrObjectNotFound says that the object does not exist (the API server answered 404).
	ErrObjectNotFound = errors.New("object not found")
	// ErrUnknownCluster says that no client is configured for the cluster.
	ErrUnknownCluster = errors.New("unknown cluster")
	// errIncompleteRef says that an object reference lacks its version, resource or name.
	errIncompleteRef = errors.New("object reference needs version, resource and name")
)

// lastAppliedAnnotation holds a copy of the object that kubectl apply writes; linkers never read it.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// ObjectCache is an ObjectGetter that GETs objects from their cluster's API server and keeps them
// in a bounded LRU for Config.TTL; an object that does not exist is remembered for
// Config.NegativeTTL. Concurrent misses for one object share one GET, which reads from the API
// server's watch cache (resourceVersion "0") and is bounded by Config.FetchTimeout. To save
// memory, the cached body leaves out status, metadata.managedFields and the
// kubectl.kubernetes.io/last-applied-configuration annotation. The key is the object's
// aggregator.ObjectKey (cluster, group, resource, namespace, name): the version only chooses the
// representation of the GET, and the UID is not checked, so a recreated object is served in its
// new incarnation.
type ObjectCache struct {
	clusters Clusters
	cfg      ObjectCacheConfig
	logger   *slog.Logger
	denied   ratelog.Limiter // Warn lines of GETs refused by RBAC
	now      func() time.Time

	lru *lru.Cache[aggregator.ObjectKey, cacheEntry]
	// lruMu serialises the cache's mutations, so that bytes (the sum of the cached bodies' sizes,
	// kept by onEvict and store) stays exact; forBytes marks evictions made for the byte bound.
	lruMu    sync.Mutex
	bytes    atomic.Int64
	forBytes bool

	mu       sync.Mutex
	inflight map[aggregator.ObjectKey]*fetchCall
	stopped  bool
	running  sync.WaitGroup // fetch goroutines

	requests                                              metric.Int64Counter
	evictions                                             metric.Int64Counter
	hit, negativeHit, fetched, notFound, failed, withheld metric.MeasurementOption
	evictExpired, evictSize, evictBytes                   metric.MeasurementOption
	bytesGauge                                            metric.Registration
	unregister                                            sync.Once
}

type cacheEntry struct {
	body    json.RawMessage // nil for a negative entry
	expires time.Time
}

// entryOverhead is what one cached entry costs besides its body: key strings, list element, map
// slot.
const entryOverhead = 256

func (e cacheEntry) size() int64 { return int64(len(e.body)) + entryOverhead }

// fetchCall is one GET shared by every caller that missed the same key.
type fetchCall struct {
	key     aggregator.ObjectKey
	done    chan struct{} // closed when body and err are set
	body    json.RawMessage
	err     error
	waiters int                // callers still waiting; the GET is cancelled when it drops to 0
	cancel  context.CancelFunc // cancels the GET
}

// NewObjectCache returns an ObjectCache that reads objects through clusters.
func NewObjectCache(clusters Clusters, cfg ObjectCacheConfig, set telemetry.Settings) (*ObjectCache, error) {
	if clusters == nil {
		return nil, errors.New("new object cache: clusters is nil")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	meter := instrument.NewMeter(set, meterScope)
	requests := meter.Counter("kelemetry.objectcache.requests",
		"Object cache lookups by result: hit, negative_hit, fetched, not_found, error, withheld (a Secret: never fetched).", "",
		instrument.Sets("result", "hit", "negative_hit", "fetched", "not_found", "error", "withheld")...)
	evictions := meter.Counter("kelemetry.objectcache.evictions",
		"Objects dropped from the object cache, by reason: size (object count), bytes or expired.", "",
		instrument.Sets("reason", "size", "bytes", "expired")...)
	if err := meter.Err(); err != nil {
		return nil, fmt.Errorf("new object cache: %w", err)
	}
	result := func(v string) metric.MeasurementOption {
		return metric.WithAttributeSet(attribute.NewSet(attribute.String("result", v)))
	}
	reason := func(v string) metric.MeasurementOption {
		return metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", v)))
	}
	c := &ObjectCache{
		clusters:     clusters,
		cfg:          cfg,
		logger:       set.Log().With("component", "kube.objectcache"),
		denied:       ratelog.Limiter{Every: time.Minute, Burst: 3},
		now:          time.Now,
		inflight:     map[aggregator.ObjectKey]*fetchCall{},
		requests:     requests,
		evictions:    evictions,
		hit:          result("hit"),
		negativeHit:  result("negative_hit"),
		fetched:      result("fetched"),
		notFound:     result("not_found"),
		withheld:     result("withheld"),
		failed:       result("error"),
		evictExpired: reason("expired"),
		evictSize:    reason("size"),
		evictBytes:   reason("bytes"),
	}
	var err error
	c.lru, err = lru.NewWithEvict(cfg.Size, c.onEvict)
	if err != nil {
		return nil, fmt.Errorf("new object cache: %w", err)
	}
	c.bytesGauge = meter.Gauge("kelemetry.objectcache.bytes",
		"Bytes of the bodies in the object cache (bounded by objectCache.maxBytes).", "By",
		func() (int64, bool) { return c.bytes.Load(), true })
	if err := meter.Err(); err != nil {
		return nil, fmt.Errorf("new object cache: %w", err)
	}
	return c, nil
}

// Bytes returns the bytes of the cached bodies, as counted against ObjectCacheConfig.MaxBytes.
func (c *ObjectCache) Bytes() int64 { return c.bytes.Load() }

// store caches e under key within the object count and byte bounds.
func (c *ObjectCache) store(key aggregator.ObjectKey, e cacheEntry) {
	c.lruMu.Lock()
	defer c.lruMu.Unlock()
	c.forBytes = true
	defer func() { c.forBytes = false }()
	if e.size() > c.cfg.MaxBytes {
		// Too large to keep at all; an older version of it goes too (onEvict counts it).
		c.lru.Remove(key)
		c.evictions.Add(context.Background(), 1, c.evictBytes)
		return
	}
	if old, ok := c.lru.Peek(key); ok {
		// Add replaces without calling onEvict.
		c.bytes.Add(-old.size())
	}
	c.forBytes = false
	c.lru.Add(key, e) // may evict the oldest for the object count (onEvict: reason size)
	c.bytes.Add(e.size())
	c.forBytes = true
	for c.bytes.Load() > c.cfg.MaxBytes && c.lru.Len() > 1 {
		c.lru.RemoveOldest()
	}
}

// remove drops key from the cache.
func (c *ObjectCache) remove(key aggregator.ObjectKey) {
	c.lruMu.Lock()
	defer c.lruMu.Unlock()
	c.lru.Remove(key)
}

// onEvict runs inside the cache's mutations, under lruMu.
func (c *ObjectCache) onEvict(_ aggregator.ObjectKey, e cacheEntry) {
	c.bytes.Add(-e.size())
	switch {
	case c.forBytes:
		c.evictions.Add(context.Background(), 1, c.evictBytes)
	case c.now().Before(e.expires):
		c.evictions.Add(context.Background(), 1, c.evictSize)
	default:
		c.evictions.Add(context.Background(), 1, c.evictExpired)
	}
}

// Len returns the number of cached entries, found or not, including expired ones not yet dropped.
func (c *ObjectCache) Len() int { return c.lru.Len() }

// errWithheld marks a lookup of a Secret, which the cache never fetches.
var errWithheld = errors.New("secrets are never fetched")

// Get returns the object's body from the cache or its API server (never a Secret's). A missing object gives an error
// wrapping ErrObjectNotFound; a cluster without a client, one wrapping ErrUnknownCluster.
func (c *ObjectCache) Get(ctx context.Context, ref aggregator.ObjectRef) (json.RawMessage, error) {
	if ref.Version == "" || ref.Resource == "" || ref.Name == "" {
		return nil, fmt.Errorf("get %s: %w", ref, errIncompleteRef)
	}
	if ref.Group == "" && ref.Resource == "secrets" {
		// Secrets are never fetched: their data is what an audit policy keeps out of the
		// trace, and the chart grants no access to them. The object counts as absent.
		c.requests.Add(ctx, 1, c.withheld)
		return nil, fmt.Errorf("get %s: %w: %w", ref, errWithheld, ErrObjectNotFound)
	}
	key := ref.Key()
	if e, ok := c.lru.Get(key); ok {
		if c.now().Before(e.expires) {
			if e.body == nil {
				c.requests.Add(ctx, 1, c.negativeHit)
				return nil, fmt.Errorf("get %s: %w", ref, ErrObjectNotFound)
			}
			c.requests.Add(ctx, 1, c.hit)
			return e.body, nil
		}
		c.remove(key)
	}

	call := c.join(ctx, key, ref)
	select {
	case <-call.done:
	case <-ctx.Done():
		c.leave(call)
		c.requests.Add(ctx, 1, c.failed)
		return nil, fmt.Errorf("get %s: %w", ref, ctx.Err())
	}
	switch {
	case call.err == nil:
		c.requests.Add(ctx, 1, c.fetched)
		return call.body, nil
	case errors.Is(call.err, ErrObjectNotFound):
		c.requests.Add(ctx, 1, c.notFound)
	default:
		c.requests.Add(ctx, 1, c.failed)
		c.reportDenied(ctx, ref, call.err)
	}
	return nil, fmt.Errorf("get %s: %w", ref, call.err)
}

// reportDenied logs a GET that RBAC refused at Warn (rate-limited): a missing permission is a
// configuration error that retries do not fix, and the linkers log their failures at Debug only.
func (c *ObjectCache) reportDenied(ctx context.Context, ref aggregator.ObjectRef, err error) {
	if !apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err) {
		return
	}
	ok, suppressed := c.denied.Allow(c.now())
	if !ok {
		return
	}
	c.logger.LogAttrs(ctx, slog.LevelWarn, "object cache: permission denied; grant get on this resource to the identity of the cluster's kubeconfig",
		slog.String("cluster", ref.Cluster), slog.String("group", ref.Group), slog.String("resource", ref.Resource),
		slog.String("namespace", ref.Namespace), slog.String("name", ref.Name), slog.Any("error", err),
		slog.Int("suppressed", suppressed))
}

// join returns the running GET of key, or starts one. The GET runs in its own goroutine so that
// every caller, the first included, can stop waiting when its context ends; it is cancelled when
// no caller waits any more, and it ends within FetchTimeout in any case.
func (c *ObjectCache) join(ctx context.Context, key aggregator.ObjectKey, ref aggregator.ObjectRef) *fetchCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	if call, ok := c.inflight[key]; ok {
		call.waiters++
		return call
	}
	fetchCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.FetchTimeout)
	call := &fetchCall{key: key, done: make(chan struct{}), waiters: 1, cancel: cancel}
	if c.stopped {
		cancel() // the GET fails at once with the context's error
	}
	c.inflight[key] = call
	c.running.Add(1)
	go c.run(fetchCtx, key, ref, call)
	return call
}

// Stop cancels the running GETs and waits for their goroutines until ctx ends. Lookups after Stop
// fail without a request.
func (c *ObjectCache) Stop(ctx context.Context) error {
	c.mu.Lock()
	c.stopped = true
	for _, call := range c.inflight {
		call.cancel()
	}
	c.mu.Unlock()
	err := loop.Wait(ctx, &c.running, "object cache")
	c.unregister.Do(func() {
		if uerr := c.bytesGauge.Unregister(); uerr != nil {
			c.logger.Debug("unregister object cache gauge", "error", uerr)
		}
	})
	return err
}

// leave records that a caller stopped waiting for call. When nobody waits any more, the GET is
// cancelled and forgotten, so that a later caller starts a fresh one.
func (c *ObjectCache) leave(call *fetchCall) {
	c.mu.Lock()
	defer c.mu.Unlock()
	call.waiters--
	if call.waiters == 0 {
		call.cancel()
		if c.inflight[call.key] == call {
			delete(c.inflight, call.key)
		}
	}
}

func (c *ObjectCache) run(ctx context.Context, key aggregator.ObjectKey, ref aggregator.ObjectRef, call *fetchCall) {
	defer c.running.Done()
	defer call.cancel()
	body, err := c.fetch(ctx, ref)
	now := c.now()
	switch {
	case err == nil:
		c.store(key, cacheEntry{body: body, expires: now.Add(c.cfg.TTL)})
	case errors.Is(err, ErrObjectNotFound):
		c.store(key, cacheEntry{expires: now.Add(c.cfg.NegativeTTL)})
	}
	c.mu.Lock()
	if c.inflight[key] == call {
		delete(c.inflight, key)
	}
	call.body, call.err = body, err
	close(call.done)
	c.mu.Unlock()
}

// fetch GETs the object from the watch cache and strips what linkers do not need.
func (c *ObjectCache) fetch(ctx context.Context, ref aggregator.ObjectRef) (json.RawMessage, error) {
	client, err := c.clusters.Dynamic(ref.Cluster)
	if err != nil {
		return nil, fmt.Errorf("client for cluster %q: %w", ref.Cluster, err)
	}
	gvr := schema.GroupVersionResource{Group: ref.Group, Version: ref.Version, Resource: ref.Resource}
	var ri dynamic.ResourceInterface = client.Resource(gvr)
	if ref.Namespace != "" {
		ri = client.Resource(gvr).Namespace(ref.Namespace)
	}
	u, err := ri.Get(ctx, ref.Name, metav1.GetOptions{ResourceVersion: "0"})
	switch {
	case apierrors.IsNotFound(err):
		return nil, ErrObjectNotFound
	case err != nil:
		return nil, err
	case u == nil:
		return nil, ErrObjectNotFound
	}
	delete(u.Object, "status")
	if meta, ok := u.Object["metadata"].(map[string]any); ok {
		delete(meta, "managedFields")
		if ann, ok := meta["annotations"].(map[string]any); ok {
			delete(ann, lastAppliedAnnotation)
		}
	}
	body, err := json.Marshal(u.Object)
	if err != nil {
		return nil, fmt.Errorf("encode object: %w", err)
	}
	return body, nil
}

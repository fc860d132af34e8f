package event

import (
	"context"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/kelemetry/kelemetry/aggregator"
)

// DefaultRelatedSize bounds the objects a RelatedLinker remembers.
const DefaultRelatedSize = 10_000

// RelatedLinker is an aggregator.Linker that links an object to the objects its Events named as
// related (a Pod's Event about its Node, ...), role parent, class "event.related". A Converter
// given to WithRelated records the relations before the Event is sent.
//
// Limitation: the aggregator runs linkers on an object's first event in a window (and when its
// body's metadata changes), so a related object first named by a later Event of an object that
// already had events in the window is only linked in the next window. The complete fix is an
// aggregator change: let aggregator.Event carry Links that Send emits as link spans.
type RelatedLinker struct {
	mu    sync.Mutex
	cache *lru.Cache[aggregator.ObjectKey, []aggregator.ObjectRef]
}

// NewRelatedLinker remembers the related objects of at most size objects (0: the default).
func NewRelatedLinker(size int) *RelatedLinker {
	if size <= 0 {
		size = DefaultRelatedSize
	}
	c, _ := lru.New[aggregator.ObjectKey, []aggregator.ObjectRef](size) // size > 0: no error
	return &RelatedLinker{cache: c}
}

// Name implements aggregator.Linker.
func (*RelatedLinker) Name() string { return "event-related" }

// Lookup implements aggregator.Linker.
func (l *RelatedLinker) Lookup(_ context.Context, obj aggregator.Object) ([]aggregator.Link, error) {
	l.mu.Lock()
	refs, _ := l.cache.Get(obj.Key())
	l.mu.Unlock()
	if len(refs) == 0 {
		return nil, nil
	}
	links := make([]aggregator.Link, len(refs))
	for i, r := range refs {
		links[i] = aggregator.Link{Target: r, Role: aggregator.RoleParent, Class: "event.related"}
	}
	return links, nil
}

// maxRelatedPerObject bounds the related objects remembered per object.
const maxRelatedPerObject = 8

// Remember records that obj's Event named related.
func (l *RelatedLinker) Remember(obj, related aggregator.ObjectRef) {
	if obj.Key() == related.Key() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	refs, _ := l.cache.Get(obj.Key())
	for _, r := range refs {
		if r.Key() == related.Key() {
			return
		}
	}
	if len(refs) >= maxRelatedPerObject {
		refs = refs[1:]
	}
	l.cache.Add(obj.Key(), append(append([]aggregator.ObjectRef(nil), refs...), related))
}

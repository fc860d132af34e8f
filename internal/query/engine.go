package query

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/store"
)

// linkMode says which related objects a query follows from the objects it finds. The values
// are the link digit of a display ID (see displayID).
type linkMode uint8

// Link modes.
const (
	linkNone        linkMode = 0 // only the found objects
	LinkFullTree    linkMode = 1 // ancestors, then every descendant of the top one
	linkAncestors   linkMode = 2 // owners, up to Depth levels
	linkDescendants linkMode = 4 // owned objects, down Depth levels
)

// Valid reports whether m is a known link mode.
func (m linkMode) Valid() bool {
	return m == linkNone || m == LinkFullTree || m == linkAncestors || m == linkDescendants
}

// Query selects the objects a search starts from.
type Query struct {
	// Cluster, Group, Resource, Namespace and Name must equal the object's; empty matches any.
	Cluster, Group, Resource, Namespace, Name string
	// Attributes must all be on one event of the object within [From, To] (exact values).
	Attributes aggregator.Attrs
	// From and To bound the search and clip what is shown; both bounds are included.
	From, To time.Time
	// Limit is the number of results the search forms (a found object and the found objects its
	// tree reaches are one result); 0 means 20.
	Limit int
}

// defaultSearchLimit is the number of results when Query.Limit is 0.
const defaultSearchLimit = 20

// object is one object of a result: its windows in the range merged into one.
type object struct {
	Ref aggregator.ObjectRef
	Key aggregator.ObjectKey
	// Windows are the object's stored windows that overlap the range, ascending.
	Windows []store.ObjectWindow
	// Start and End are the union of the windows, clipped to the range.
	Start, End time.Time
	// Attributes are those of the newest stored object span.
	Attributes aggregator.Attrs
	// Synthetic is set when no window holds the object span (retention, a lost write, or an
	// object only known from other objects' links).
	Synthetic bool
	// Events are the event spans that start within the range, sorted by (Start, SpanID).
	Events []*aggregator.Span
	// Requests are the request spans (kube-apiserver's spans of the request, KindRequest) under
	// each of Events, by the event span's ID, sorted by (Start, SpanID); nil when none.
	Requests map[trace.SpanID][]*aggregator.Span
	// Unread is set when a budget of the request (spans read, time) ran out before the
	// object's spans were read: it is named, without events, attributes or links.
	Unread bool

	links []objLink
}

type objLink struct {
	target aggregator.ObjectRef
	role   aggregator.Role
	class  string
}

// edge is a parent-child relation between two objects of a result.
type edge struct {
	Parent, Child aggregator.ObjectKey
	Class         string
}

// Graph is one search result: a connected group of objects and the tree to show them as.
type Graph struct {
	// Seeds are the found objects in the group, sorted; Seeds[0] anchors the display ID.
	Seeds []aggregator.ObjectKey
	// AnchorObject is the found object that anchors the display ID (the first found object of
	// the group), and Anchor its first window in the range.
	AnchorObject aggregator.ObjectKey
	Anchor       store.ObjectWindow
	From         time.Time
	To           time.Time
	// Objects holds every object of the group.
	Objects map[aggregator.ObjectKey]*object
	// Roots are the tree roots, sorted; more than one is shown under a synthetic root.
	Roots []aggregator.ObjectKey
	// Children are the tree edges by parent, sorted by child key.
	Children map[aggregator.ObjectKey][]edge
	// References are the other parents of objects with more than one, by parent.
	References map[aggregator.ObjectKey][]edge
	// Omitted counts, by object, the related objects a budget or the depth left out.
	Omitted map[aggregator.ObjectKey]int
	// Truncated, when not empty, says which budget of the request (Config.MaxSpans,
	// Config.Timeout, Config.MaxMemoryBytes) ran out, e.g. "result truncated: span budget of 200000 reached; narrow
	// the time range". Objects not read then are marked Unread.
	Truncated string
}

// Engine finds objects, follows their links and merges their windows.
type Engine struct {
	r       store.Reader
	window  time.Duration
	cfg     Config
	limiter *limiter
}

// NewEngine returns an engine over r, whose traces have windows of length w. The APIs built
// on it share its limits of heavy requests (Config.MaxConcurrent, Config.MaxMemoryBytes,
// resolved against the Go memory limit set now).
func NewEngine(r store.Reader, w aggregator.Window, cfg Config) *Engine {
	cfg = cfg.WithDefaults()
	return &Engine{r: r, window: w.Length(), cfg: cfg, limiter: cfg.newLimiter()}
}

// newLimiter is the admission of cfg's heavy requests (cfg with defaults).
func (c Config) newLimiter() *limiter {
	return newLimiter(c.MaxConcurrent, c.QueueWait, c.MemoryBudget(goMemoryLimit()), c.MaxRenderBytes)
}

// Reader is the store the engine reads.
func (e *Engine) Reader() store.Reader { return e.r }

// Window is the trace window length the engine assumes.
func (e *Engine) Window() time.Duration { return e.window }

// Config returns the engine's configuration with defaults applied.
func (e *Engine) Config() Config { return e.cfg }

// errNoObject is returned by Expand when the object has nothing stored in the range.
var errNoObject = errors.New("object not found")

// ErrBudget is wrapped by the errors of Search and Expand when a budget of the request ran
// out before anything could be shown.
var ErrBudget = errors.New("query budget exhausted")

// lookupParallelism bounds the object lookups (store.Reader.FindObjects) one request runs at
// once.
const lookupParallelism = 8

// readChunk and maxReadChunk bound the windows one store read asks for, so that the span budget
// is checked between reads: the first read of a request asks for readChunk, later ones for as
// many as the budget left would hold at the spans per window read so far, up to maxReadChunk.
// Large reads let the store read in parallel (Pebble splits a read of 512 or more windows over
// the cores); reads of 32 made the 1,000-pod Deployment tree 125 small serial reads.
const (
	readChunk    = 32
	maxReadChunk = 1024
)

// Truncation messages: what ran out, and what to do about it.
func spanBudgetMsg(n int) string {
	return fmt.Sprintf("result truncated: span budget of %d reached; narrow the time range", n)
}

func timeBudgetMsg(d time.Duration) string {
	return fmt.Sprintf("result truncated: time budget of %s reached; narrow the time range", d)
}

// Search finds the objects q selects, follows links from each per mode and returns one graph per
// connected group, in the order of their first found object.
func (e *Engine) Search(ctx context.Context, q Query, mode linkMode) ([]*Graph, error) {
	r, err := e.SearchResults(ctx, q, mode)
	return r.Graphs, err
}

// SearchResult is the answer of SearchResults.
type SearchResult struct {
	Graphs []*Graph
	// More is set when more results exist than Query.Limit allowed: found objects that none of
	// the results holds (one result at least). Unshown counts those objects (several may make
	// one result); with the scan of found objects cut at searchScanLimit, more exist than it
	// counts.
	More    bool
	Unshown int
	ScanCut bool
}

// searchScanLimit bounds the objects a search reads from the store's index to form its results:
// the limit counts results (a Deployment and its 50 Pods are one), not found objects.
const searchScanLimit = 5000

// SearchResults finds the objects of q and forms at most q.Limit results (default 20), each the
// tree of one found object with the found objects it reaches; it says whether more exist.
func (e *Engine) SearchResults(ctx context.Context, q Query, mode linkMode) (SearchResult, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	limit := q.Limit
	if limit <= 0 {
		limit = defaultSearchLimit
	}
	found, err := e.r.FindObjects(ctx, store.ObjectQuery{
		Cluster: q.Cluster, Group: q.Group, Resource: q.Resource, Namespace: q.Namespace, Name: q.Name,
		From: q.From, To: q.To, Limit: searchScanLimit + 1, Attributes: q.Attributes,
	})
	if err != nil {
		if isDeadline(ctx, err) {
			return SearchResult{}, fmt.Errorf("find objects: %w: %s", ErrBudget, strings.TrimPrefix(timeBudgetMsg(e.cfg.Timeout), truncatedPrefix))
		}
		return SearchResult{}, err
	}
	scanCut := len(found) > searchScanLimit
	if scanCut {
		found = found[:searchScanLimit]
	}
	l := e.newLoader(ctx, q.From, q.To)
	// The found objects are loaded in slices as the results need them: most searches form their
	// results from the first few.
	loaded := 0
	load := func(upTo int) error {
		if upTo <= loaded {
			return nil
		}
		upTo = min(max(upTo, loaded+limit), len(found))
		refs := make([]aggregator.ObjectRef, 0, upTo-loaded)
		for _, f := range found[loaded:upTo] {
			refs = append(refs, f.Object)
		}
		loaded = upTo
		return l.loadMany(ctx, refs)
	}
	if err := load(min(limit, len(found))); err != nil {
		return SearchResult{}, err
	}
	first := make([]aggregator.ObjectRef, 0, loaded)
	for _, f := range found[:loaded] {
		first = append(first, f.Object)
	}
	if err := l.nothingRead(first); err != nil {
		return SearchResult{}, err
	}
	var res SearchResult
	walks := make([]*walk, 0, len(found))
	// A found object that an earlier walk reached joins that walk's result instead of being
	// walked again: a thousand Pods of one Deployment make one walk, not a thousand.
	reached := map[aggregator.ObjectKey]*walk{}
	for i, f := range found {
		if len(f.Windows) == 0 {
			continue
		}
		if w := reached[f.Object.Key()]; w != nil {
			w.joined = append(w.joined, f.Object.Key())
			continue
		}
		if len(walks) == limit {
			// One more result at least: count the found objects no result reached.
			res.More = true
			for _, rest := range found[i:] {
				if len(rest.Windows) > 0 && reached[rest.Object.Key()] == nil {
					res.Unshown++
				}
			}
			break
		}
		if err := load(i + 1); err != nil {
			return SearchResult{}, err
		}
		if err := ctx.Err(); err != nil && len(walks) > 0 && isDeadline(ctx, err) {
			l.truncate(timeBudgetMsg(e.cfg.Timeout))
			break // the results walked so far are the answer
		}
		w, err := l.walkFrom(ctx, f.Object, mode)
		if err != nil {
			return SearchResult{}, err
		}
		w.anchor = f.Windows[0]
		walks = append(walks, w)
		for _, k := range w.order {
			if reached[k] == nil {
				reached[k] = w
			}
		}
	}
	if scanCut {
		res.More, res.ScanCut = true, true
	}
	res.Graphs = l.graphs(walks)
	return res, nil
}

// expand follows links per mode from one object and returns its graph. anchor is the window
// that names it in a display ID. It returns errNoObject when nothing of the object is stored in
// [from, to].
func (e *Engine) expand(ctx context.Context, ref aggregator.ObjectRef, anchor store.ObjectWindow, from, to time.Time, mode linkMode) (*Graph, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	l := e.newLoader(ctx, from, to)
	o, err := l.load(ctx, ref)
	if err != nil {
		return nil, err
	}
	if err := l.nothingRead([]aggregator.ObjectRef{ref}); err != nil {
		return nil, err
	}
	if len(o.Windows) == 0 {
		return nil, fmt.Errorf("%s: %w", ref.Key(), errNoObject)
	}
	w, err := l.walkFrom(ctx, ref, mode)
	if err != nil {
		return nil, err
	}
	w.anchor = anchor
	gs := l.graphs([]*walk{w})
	return gs[0], nil
}

// maxAnchorWindows bounds the windows FindAnchor probes.
const maxAnchorWindows = 20_000

// findAnchor finds the object whose hash is oh (a display ID's anchor) from its first window in
// [from, to]: the object's trace IDs are computed for each window of the range and read in
// batches, so no index or search is needed. It returns errNoObject when nothing of it is stored
// in the range.
func (e *Engine) findAnchor(ctx context.Context, oh aggregator.ObjectHash, from, to time.Time) (aggregator.ObjectRef, store.ObjectWindow, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	first := aggregator.WindowStart(from, e.window)
	if n := to.Sub(first) / e.window; n >= maxAnchorWindows {
		return aggregator.ObjectRef{}, store.ObjectWindow{}, fmt.Errorf("range %s..%s spans %d windows, more than %d: %w",
			from.Format(time.RFC3339), to.Format(time.RFC3339), n, maxAnchorWindows, errNoObject)
	}
	for w := first; !w.After(to); {
		ws := make([]store.ObjectWindow, 0, readChunk)
		for ; !w.After(to) && len(ws) < readChunk; w = w.Add(e.window) {
			ws = append(ws, store.ObjectWindow{Window: w, TraceID: aggregator.TraceIDForHash(oh, w)})
		}
		traces, err := e.r.GetTraces(ctx, ws)
		if err != nil {
			if isDeadline(ctx, err) {
				return aggregator.ObjectRef{}, store.ObjectWindow{}, fmt.Errorf("find the anchor object: %w: %s", ErrBudget, strings.TrimPrefix(timeBudgetMsg(e.cfg.Timeout), truncatedPrefix))
			}
			return aggregator.ObjectRef{}, store.ObjectWindow{}, err
		}
		for i, spans := range traces {
			if ref, ok := store.TraceObject(spans); ok {
				return ref, ws[i], nil
			}
		}
	}
	return aggregator.ObjectRef{}, store.ObjectWindow{}, errNoObject
}

// loader reads objects once per request, within the request's span and time budgets.
type loader struct {
	e        *Engine
	from, to time.Time
	objs     map[aggregator.ObjectKey]*object
	// spans counts the stored spans read; truncated is the message of the first budget that
	// ran out ("" while none has).
	spans     int
	truncated string
	// windowsRead counts the windows read and bytesRead their charge (readBytes), for the
	// spans and bytes per window (chunkWindows).
	windowsRead int
	bytesRead   int64
	// mem is the request's admission, charged with what is read (nil: not admitted).
	mem *ticket
	// omitted are the related objects budgets or the depth left out, by the object linking them.
	omitted map[aggregator.ObjectKey]map[aggregator.ObjectKey]bool
}

// isDeadline reports whether err (or ctx) is the request's deadline, rather than a
// cancellation or a store failure.
func isDeadline(ctx context.Context, err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded)
}

// truncate records that a budget ran out; the first reason is kept.
func (l *loader) truncate(msg string) {
	if l.truncated == "" {
		l.truncated = msg
	}
}

// nothingRead returns an error wrapping ErrBudget when a budget ran out before any of refs
// (the objects a request starts from) was read.
func (l *loader) nothingRead(refs []aggregator.ObjectRef) error {
	if l.truncated == "" || len(refs) == 0 {
		return nil
	}
	for _, ref := range refs {
		if o := l.objs[ref.Key()]; o != nil && !o.Unread {
			return nil
		}
	}
	return fmt.Errorf("%w: %s", ErrBudget, strings.TrimPrefix(l.truncated, truncatedPrefix))
}

func (e *Engine) newLoader(ctx context.Context, from, to time.Time) *loader {
	return &loader{e: e, from: from, to: to, mem: ticketOf(ctx), objs: map[aggregator.ObjectKey]*object{},
		omitted: map[aggregator.ObjectKey]map[aggregator.ObjectKey]bool{}}
}

func (l *loader) inRange(t time.Time) bool {
	return (l.from.IsZero() || !t.Before(l.from)) && (l.to.IsZero() || !t.After(l.to))
}

// load reads every window of ref's object in the range. An object with nothing stored comes
// back with no windows and Synthetic set.
func (l *loader) load(ctx context.Context, ref aggregator.ObjectRef) (*object, error) {
	if err := l.loadMany(ctx, []aggregator.ObjectRef{ref}); err != nil {
		return nil, err
	}
	return l.objs[ref.Key()], nil
}

// loadMany loads the objects not loaded yet, reading their windows in batches of readChunk.
// Once a budget ran out, the objects left are marked Unread instead.
func (l *loader) loadMany(ctx context.Context, refs []aggregator.ObjectRef) error {
	var todo []*object
	for _, ref := range refs {
		key := ref.Key()
		if _, ok := l.objs[key]; ok {
			continue
		}
		o := &object{Ref: ref, Key: key, Synthetic: true}
		l.objs[key] = o
		todo = append(todo, o)
		if l.truncated != "" {
			o.Unread = true
		}
	}
	// Find the objects' windows, several lookups at a time: a remote store answers each after a
	// round trip. The answers are then taken in order, as if looked up one by one.
	results := make([]lookup, len(todo))
	if finder, ok := l.e.r.(store.ExactFinder); ok {
		l.findExact(ctx, finder, todo, results)
	} else {
		l.findEach(ctx, todo, results)
	}
	for i, o := range todo {
		if o.Unread {
			continue
		}
		if l.truncated != "" {
			o.Unread = true
			continue
		}
		if err := results[i].err; err != nil {
			if isDeadline(ctx, err) {
				l.truncate(timeBudgetMsg(l.e.cfg.Timeout))
				o.Unread = true
				continue
			}
			return err
		}
		for _, f := range results[i].found {
			if f.Object.Key() == o.Key {
				o.Ref = f.Object
				o.Windows = f.Windows
				break
			}
		}
	}
	for len(todo) > 0 {
		n, windows, chunk := 0, 0, l.chunkWindows()
		for n < len(todo) && (n == 0 || windows+len(todo[n].Windows) <= chunk) {
			windows += len(todo[n].Windows)
			n++
		}
		batch := todo[:n]
		todo = todo[n:]
		if err := l.read(ctx, batch); err != nil {
			return err
		}
	}
	return nil
}

// chunkWindows is how many windows the next store read may ask for (see readChunk).
func (l *loader) chunkWindows() int {
	if l.windowsRead == 0 {
		return readChunk
	}
	perWindow := max(1, (l.spans+l.windowsRead-1)/l.windowsRead)
	n := min(max(readChunk, (l.e.cfg.MaxSpans-l.spans)/perWindow), maxReadChunk)
	if room := l.mem.room(); room >= 0 && l.bytesRead > 0 {
		// No larger than the memory the request may still take: one read past it at most.
		bytesPerWindow := max(1, (l.bytesRead+int64(l.windowsRead)-1)/int64(l.windowsRead))
		n = min(n, max(readChunk, int(min(room/bytesPerWindow, maxReadChunk))))
	}
	return n
}

// lookup is the answer of one object's lookup.
type lookup struct {
	found []store.ObjectWindows
	err   error
}

// findExact looks up the objects of todo not marked Unread with one call of finder.
func (l *loader) findExact(ctx context.Context, finder store.ExactFinder, todo []*object, results []lookup) {
	var keys []aggregator.ObjectKey
	var idx []int
	for i, o := range todo {
		if !o.Unread {
			keys, idx = append(keys, o.Key), append(idx, i)
		}
	}
	if len(keys) == 0 {
		return
	}
	found, err := finder.FindExact(ctx, keys, l.from, l.to)
	for n, i := range idx {
		if err != nil {
			results[i].err = err
			continue
		}
		if len(found[n].Windows) > 0 {
			results[i].found = found[n : n+1]
		}
	}
}

// findEach looks up the objects of todo not marked Unread one by one, several at a time: a few
// workers take the objects in turn (a goroutine per object would grow a fresh stack for each
// store lookup).
func (l *loader) findEach(ctx context.Context, todo []*object, results []lookup) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(lookupParallelism, len(todo)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(todo) {
					return
				}
				o := todo[i]
				if o.Unread {
					continue
				}
				key := o.Key
				results[i].found, results[i].err = l.e.r.FindObjects(ctx, store.ObjectQuery{
					Cluster: key.Cluster, Group: key.Group, Resource: key.Resource, Namespace: key.Namespace, Name: key.Name,
					From: l.from, To: l.to, Limit: 1, Exact: true,
				})
			}
		})
	}
	wg.Wait()
}

// read reads the windows of a batch of objects and fills them, counting the spans read.
func (l *loader) read(ctx context.Context, batch []*object) error {
	var ws []store.ObjectWindow
	if l.truncated == "" && ctx.Err() != nil && isDeadline(ctx, ctx.Err()) {
		l.truncate(timeBudgetMsg(l.e.cfg.Timeout))
	}
	if l.truncated == "" {
		for _, o := range batch {
			if !o.Unread {
				ws = append(ws, o.Windows...)
			}
		}
	}
	var spans [][]*aggregator.Span
	// short is set when the memory budget had no room for what was read: the batch is shown
	// (it is in memory already), nothing more is read.
	short := false
	if len(ws) > 0 {
		var err error
		spans, err = l.e.r.GetTraces(ctx, ws)
		l.windowsRead += len(ws)
		if err != nil {
			if !isDeadline(ctx, err) {
				return err
			}
			l.truncate(timeBudgetMsg(l.e.cfg.Timeout))
			spans = nil
		}
		if l.mem != nil {
			n := readBytes(spans)
			l.bytesRead += n
			short = !l.mem.chargeRead(n)
		}
	}
	// Which objects are read is decided in order (the span budget runs out at one of them); the
	// objects are then filled in parallel, each from its own spans.
	per := make([][][]*aggregator.Span, len(batch))
	for i, o := range batch {
		if o.Unread || l.truncated != "" {
			o.Unread, o.Synthetic = true, false
			continue
		}
		per[i] = spans[:len(o.Windows):len(o.Windows)]
		spans = spans[len(o.Windows):]
		for _, w := range per[i] {
			l.spans += len(w)
		}
		if l.spans >= l.e.cfg.MaxSpans {
			l.truncate(spanBudgetMsg(l.e.cfg.MaxSpans))
		}
	}
	inParallel(len(batch), minParallelObjects, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			l.fill(batch[i], per[i])
		}
	})
	if short {
		l.truncate(l.mem.memoryMessage())
	}
	return nil
}

// fill merges the spans of o's windows (perWindow[i] holds o.Windows[i]) into o.
func (l *loader) fill(o *object, perWindow [][]*aggregator.Span) {
	key := o.Key
	// The links seen: o.links itself while there are few (most objects link to one or two
	// others, in every window), a map once there are many.
	var seenLinks map[objLink]bool
	seen := func(lk objLink) bool {
		if seenLinks == nil && len(o.links) < 16 {
			return slices.Contains(o.links, lk)
		}
		if seenLinks == nil {
			seenLinks = make(map[objLink]bool, 2*len(o.links))
			for _, x := range o.links {
				seenLinks[x] = true
			}
		}
		return seenLinks[lk]
	}
	var newestObj time.Time
	var requests []*aggregator.Span
	for _, spans := range perWindow {
		for _, sp := range spans {
			switch sp.Kind {
			case aggregator.KindObject:
				if o.Synthetic || !sp.Window.Before(newestObj) {
					o.Synthetic, newestObj = false, sp.Window
					o.Attributes = sp.Attributes
				}
			case aggregator.KindLink:
				if sp.Link == nil || !sp.Link.Role.Valid() {
					continue
				}
				lk := objLink{target: sp.Link.Target, role: sp.Link.Role, class: sp.Link.Class}
				if lk.target.Cluster == "" {
					lk.target.Cluster = key.Cluster
				}
				lk.target.Version, lk.target.UID = "", "" // dedup on the key
				if lk.target.Key() == key || seen(lk) {
					continue
				}
				if seenLinks != nil {
					seenLinks[lk] = true
				}
				o.links = append(o.links, lk)
			case aggregator.KindEvent:
				if l.inRange(sp.Start) {
					o.Events = append(o.Events, sp)
				}
			case aggregator.KindRequest:
				requests = append(requests, sp)
			}
		}
	}
	if len(requests) > 0 {
		o.Requests = groupRequests(o.Events, requests)
	}
	slices.SortFunc(o.Events, func(a, b *aggregator.Span) int {
		return cmp.Or(a.Start.Compare(b.Start), bytes.Compare(a.SpanID[:], b.SpanID[:]))
	})
	slices.SortFunc(o.links, func(a, b objLink) int {
		return cmp.Or(strings.Compare(a.class, b.class), keyLess(a.target.Key(), b.target.Key()),
			strings.Compare(string(a.role), string(b.role)))
	})
	o.Start, o.End = l.from, l.to
	if len(o.Windows) > 0 {
		first := o.Windows[0].Window
		last := o.Windows[len(o.Windows)-1].Window.Add(l.e.window)
		if o.Start.IsZero() || first.After(o.Start) {
			o.Start = first
		}
		if o.End.IsZero() || last.Before(o.End) {
			o.End = last
		}
	}
	if o.Start.IsZero() || o.End.IsZero() {
		// An unbounded range and nothing stored: fall back to the events, or a zero span.
		for _, ev := range o.Events {
			o.Start, o.End = ev.Start, ev.End
			break
		}
	}
}

// groupRequests files request spans under the event span each descends from: its parent, or an
// ancestor's among the request spans. A span whose chain ends at a span that is not there (the
// sender dropped it, or its event is out of the range) is left out: it cannot be placed.
func groupRequests(events, requests []*aggregator.Span) map[trace.SpanID][]*aggregator.Span {
	isEvent := make(map[trace.SpanID]bool, len(events))
	for _, ev := range events {
		isEvent[ev.SpanID] = true
	}
	byID := make(map[trace.SpanID]*aggregator.Span, len(requests))
	for _, sp := range requests {
		if old, ok := byID[sp.SpanID]; !ok || sp.End.After(old.End) {
			byID[sp.SpanID] = sp
		}
	}
	out := map[trace.SpanID][]*aggregator.Span{}
	for _, sp := range byID {
		cur := sp
		for range 64 {
			if isEvent[cur.ParentID] {
				out[cur.ParentID] = append(out[cur.ParentID], sp)
				break
			}
			p, ok := byID[cur.ParentID]
			if !ok {
				break
			}
			cur = p
		}
	}
	for _, list := range out {
		slices.SortFunc(list, func(a, b *aggregator.Span) int {
			return cmp.Or(a.Start.Compare(b.Start), bytes.Compare(a.SpanID[:], b.SpanID[:]))
		})
	}
	return out
}

// walk is what following links from one found object reached.
type walk struct {
	seed    aggregator.ObjectKey
	anchor  store.ObjectWindow
	visited map[aggregator.ObjectKey]bool
	order   []aggregator.ObjectKey
	edges   map[[2]aggregator.ObjectKey]string // {parent, child} -> class
	added   int                                // objects added besides the seed
	// joined are found objects this walk reached, which were not walked from themselves.
	joined []aggregator.ObjectKey
}

// edge records a relation; of two links between the same objects, one with a class wins.
func (w *walk) edge(pair [2]aggregator.ObjectKey, class string) {
	if old, ok := w.edges[pair]; !ok || old == "" {
		w.edges[pair] = class
	}
}

// omit records that a budget or the depth left target out where from links to it. It is kept
// per request, not per walk: from belongs to one result group, and a thousand walks past one
// wide level record its omissions once.
func (l *loader) omit(from, target aggregator.ObjectKey) {
	if l.omitted[from] == nil {
		l.omitted[from] = map[aggregator.ObjectKey]bool{}
	}
	l.omitted[from][target] = true
}

func (w *walk) visit(k aggregator.ObjectKey) {
	if !w.visited[k] {
		w.visited[k] = true
		w.order = append(w.order, k)
	}
}

func (l *loader) walkFrom(ctx context.Context, seed aggregator.ObjectRef, mode linkMode) (*walk, error) {
	if _, err := l.load(ctx, seed); err != nil {
		return nil, err
	}
	w := &walk{
		seed: seed.Key(), visited: map[aggregator.ObjectKey]bool{},
		edges: map[[2]aggregator.ObjectKey]string{},
	}
	w.visit(w.seed)
	depth := l.e.cfg.Depth
	switch mode {
	case linkAncestors:
		if _, err := l.bfs(ctx, w, w.seed, aggregator.RoleParent, depth); err != nil {
			return nil, err
		}
	case linkDescendants:
		if _, err := l.bfs(ctx, w, w.seed, aggregator.RoleChild, depth); err != nil {
			return nil, err
		}
	case LinkFullTree:
		top, err := l.bfs(ctx, w, w.seed, aggregator.RoleParent, depth)
		if err != nil {
			return nil, err
		}
		if _, err := l.bfs(ctx, w, top.key, aggregator.RoleChild, top.level+depth); err != nil {
			return nil, err
		}
	}
	return w, nil
}

type leveled struct {
	key   aggregator.ObjectKey
	level int
}

// bfs follows links of one role breadth-first from start, at most depth levels. Edges are
// taken in sorted order; objects beyond a budget or the depth are counted as omitted on the
// object that links to them. It returns the first object of the last level reached.
func (l *loader) bfs(ctx context.Context, w *walk, start aggregator.ObjectKey, role aggregator.Role, depth int) (leveled, error) {
	cfg := l.e.cfg
	seen := map[aggregator.ObjectKey]bool{start: true}
	level := []aggregator.ObjectKey{start}
	last := leveled{key: start}
	for d := 0; len(level) > 0; d++ {
		var next []aggregator.ObjectKey
		var refs []aggregator.ObjectRef
		addedHere := 0
		for _, k := range level {
			o := l.objs[k]
			if o == nil {
				continue
			}
			for _, lk := range o.links {
				if lk.role != role {
					continue
				}
				tk := lk.target.Key()
				pair := [2]aggregator.ObjectKey{tk, k}
				if role == aggregator.RoleChild {
					pair = [2]aggregator.ObjectKey{k, tk}
				}
				if seen[tk] {
					if w.visited[tk] {
						w.edge(pair, lk.class) // a second path: a second parent
					}
					continue
				}
				known := w.visited[tk]
				if d >= depth || (!known && (addedHere >= cfg.PerLevel || w.added >= cfg.Total)) {
					l.omit(k, tk)
					continue
				}
				if !known {
					addedHere++
					w.added++
					w.visit(tk)
				}
				seen[tk] = true
				w.edge(pair, lk.class)
				next = append(next, tk)
				refs = append(refs, lk.target)
			}
		}
		if err := l.loadMany(ctx, refs); err != nil {
			return last, err
		}
		if len(next) > 0 {
			last = leveled{key: next[0], level: d + 1}
		}
		level = next
		if err := ctx.Err(); err != nil {
			if !isDeadline(ctx, err) {
				return last, err
			}
			l.truncate(timeBudgetMsg(l.e.cfg.Timeout))
		}
	}
	return last, nil
}

// graphs merges walks that share objects and builds each group's tree.
func (l *loader) graphs(walks []*walk) []*Graph {
	// Union-find over walks by shared objects.
	parent := make([]int, len(walks))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int //nolint:staticcheck // declared first: the closure calls itself
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	// The maps are sized from the walks: growing them was a tenth of a large query.
	total := 0
	for _, w := range walks {
		total += len(w.order)
	}
	// One walk is one group: no key needs hashing for that.
	if len(walks) > 1 {
		owner := make(map[aggregator.ObjectKey]int, total)
		for i, w := range walks {
			for _, k := range w.order {
				if j, ok := owner[k]; ok {
					a, b := find(i), find(j)
					if a != b {
						parent[max(a, b)] = min(a, b)
					}
				} else {
					owner[k] = i
				}
			}
		}
	}
	var out []*Graph
	byRoot := map[int]*Graph{}
	edges := map[*Graph]map[[2]aggregator.ObjectKey]string{}
	for i, w := range walks {
		r := find(i)
		g := byRoot[r]
		first := g == nil
		if first {
			g = &Graph{
				AnchorObject: w.seed, Anchor: w.anchor, From: l.from, To: l.to,
				Objects: make(map[aggregator.ObjectKey]*object, len(w.order)), Children: map[aggregator.ObjectKey][]edge{},
				References: map[aggregator.ObjectKey][]edge{}, Omitted: map[aggregator.ObjectKey]int{},
			}
			byRoot[r] = g
			// The group's first walk lends it its edges (the walks end with this call): copying
			// the 10,000 edges of a large tree hashed 20,000 object keys.
			edges[g] = w.edges
			out = append(out, g)
		}
		g.Seeds = append(g.Seeds, w.seed)
		g.Seeds = append(g.Seeds, w.joined...)
		for _, k := range w.order {
			g.Objects[k] = l.objs[k]
		}
		if first {
			continue
		}
		if edges[g] == nil {
			edges[g] = make(map[[2]aggregator.ObjectKey]string, len(w.edges))
		}
		for pair, class := range w.edges {
			// Walks of one group share most edges: keep each once, one with a class first.
			if old, ok := edges[g][pair]; ok && (old != "" || class == "") {
				continue
			}
			edges[g][pair] = class
		}
	}
	for _, g := range out {
		// Most edges of a large group leave a few parents (a ReplicaSet's thousands of Pods):
		// the list of the parent before is kept at hand rather than looked up per edge.
		var parent aggregator.ObjectKey
		var list []edge
		for pair, class := range edges[g] {
			if list == nil || pair[0] != parent {
				if list != nil {
					g.Children[parent] = list
				}
				parent, list = pair[0], g.Children[pair[0]]
			}
			list = append(list, edge{Parent: pair[0], Child: pair[1], Class: class})
		}
		if list != nil {
			g.Children[parent] = list
		}
		g.Truncated = l.truncated
		// What one walk left out and another showed is not omitted.
		for k, targets := range l.omitted {
			if g.Objects[k] == nil {
				continue
			}
			n := 0
			for tk := range targets {
				if g.Objects[tk] == nil {
					n++
				}
			}
			if n > 0 {
				g.Omitted[k] = n
			}
		}
		g.buildTree()
	}
	return out
}

// keyLess orders object keys as their strings (aggregator.ObjectKey.String) compare, without
// building the strings. Field by field, the first field that differs decides where the two
// differ within their common length; when one such field is a prefix of the other, the joined
// strings go on with a separator on one side, so that rare case compares the joined keys (in
// stack buffers; longer keys spill to the heap). The query engine sorts thousands of keys, and
// joining every pair was 5% of drawing a 1,000-pod tree.
func keyLess(a, b aggregator.ObjectKey) int {
	fa := [...]string{a.Cluster, a.Group, a.Resource, a.Namespace, a.Name}
	fb := [...]string{b.Cluster, b.Group, b.Resource, b.Namespace, b.Name}
	for i := range fa {
		x, y := fa[i], fb[i]
		if x == y {
			continue
		}
		n := min(len(x), len(y))
		if c := strings.Compare(x[:n], y[:n]); c != 0 {
			return c
		}
		if i == len(fa)-1 {
			return cmp.Compare(len(x), len(y))
		}
		var ab, bb [256]byte
		return bytes.Compare(appendKey(ab[:0], a), appendKey(bb[:0], b))
	}
	return 0
}

// appendKey appends the bytes of k.String() to dst.
func appendKey(dst []byte, k aggregator.ObjectKey) []byte {
	dst = append(append(dst, k.Cluster...), '/')
	dst = append(append(dst, k.Group...), '/')
	dst = append(append(dst, k.Resource...), '/')
	dst = append(append(dst, k.Namespace...), '/')
	return append(dst, k.Name...)
}

// buildTree turns the collected edges (in g.Children, possibly with duplicates and several
// parents per object) into a tree: each object keeps one parent (owner-class links first, then
// by key), the others reference it. Objects only on cycles get the smallest of them as a root.
func (g *Graph) buildTree() {
	// The objects are numbered in key order, and the work is on their numbers: hashing an
	// object key (five strings) in a map per step was a tenth of drawing a 10,000-pod tree.
	keys := make([]aggregator.ObjectKey, 0, len(g.Objects))
	anyNil := false // an object key without its object: no edge to or from it is kept
	for k, o := range g.Objects {
		keys = append(keys, k)
		anyNil = anyNil || o == nil
	}
	slices.SortFunc(keys, keyLess)
	num := make(map[aggregator.ObjectKey]int32, len(keys))
	for i, k := range keys {
		num[k] = int32(i)
	}
	// parents[c]: the edges into object c, each pair of objects once (edges between objects
	// of the group only).
	parents := make([][]edge, len(keys))
	seenEdge := make(map[[2]int32]bool, len(keys))
	for _, es := range g.Children {
		var p int32
		var okP bool
		for i, e := range es {
			if i == 0 || e.Parent != es[i-1].Parent { // a list holds one parent's edges
				p, okP = num[e.Parent]
			}
			c, okC := num[e.Child]
			if !okP || !okC || (anyNil && (g.Objects[e.Parent] == nil || g.Objects[e.Child] == nil)) || seenEdge[[2]int32{p, c}] {
				continue
			}
			seenEdge[[2]int32{p, c}] = true
			parents[c] = append(parents[c], e)
		}
	}
	// Children are taken in key order, so that each parent's list of children comes out in the
	// order of their keys (sorting the lists after was 3% of a 1,000-pod tree).
	primary := make([]int32, len(keys)) // the parent kept, -1 for none
	counts := make([]int32, len(keys))  // the children kept, by parent number
	for c, es := range parents {
		primary[c] = -1
		if len(es) == 0 {
			continue
		}
		slices.SortFunc(es, func(a, b edge) int {
			return cmp.Or(cmp.Compare(boolInt(a.Class == ""), boolInt(b.Class == "")), keyLess(a.Parent, b.Parent))
		})
		primary[c] = num[es[0].Parent]
		counts[primary[c]]++
	}
	children := make([][]edge, len(keys)) // by parent number, each list allocated once
	for p, n := range counts {
		if n > 0 {
			children[p] = make([]edge, 0, n)
		}
	}
	var refs map[aggregator.ObjectKey][]edge
	for c, es := range parents {
		if len(es) == 0 {
			continue
		}
		p := primary[c]
		children[p] = append(children[p], es[0])
		for _, e := range es[1:] {
			if refs == nil {
				refs = map[aggregator.ObjectKey][]edge{}
			}
			refs[e.Parent] = append(refs[e.Parent], e)
		}
	}
	var roots []aggregator.ObjectKey
	for i, k := range keys {
		if primary[i] < 0 {
			roots = append(roots, k)
		}
	}
	reached := make([]bool, len(keys))
	var stack []int32
	mark := func(i int32) {
		stack = append(stack[:0], i)
		for len(stack) > 0 {
			i := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if reached[i] {
				continue
			}
			reached[i] = true
			for _, e := range children[i] {
				stack = append(stack, num[e.Child])
			}
		}
	}
	for _, r := range roots {
		mark(num[r])
	}
	for i := range keys {
		if reached[i] {
			continue
		}
		// Object i is on or under a cycle of parents: walk up to the cycle, cut the parent edge
		// of its smallest object (the smallest number) and keep that edge as a reference.
		pos := map[int32]int{}
		var path []int32
		cur := int32(i)
		for {
			if _, ok := pos[cur]; ok {
				break
			}
			pos[cur] = len(path)
			path = append(path, cur)
			cur = primary[cur]
		}
		cut := slices.Min(path[pos[cur]:])
		p := primary[cut]
		e := children[p][slices.IndexFunc(children[p], func(x edge) bool { return x.Child == keys[cut] })]
		children[p] = slices.DeleteFunc(children[p], func(x edge) bool { return x == e })
		if refs == nil {
			refs = map[aggregator.ObjectKey][]edge{}
		}
		refs[e.Parent] = append(refs[e.Parent], e)
		primary[cut] = -1
		roots = append(roots, keys[cut])
		mark(cut)
	}
	slices.SortFunc(roots, keyLess)
	// Children lists are in order already (cutting a cycle above only deletes from them).
	byParent := map[aggregator.ObjectKey][]edge{}
	for p, es := range children {
		if len(es) > 0 {
			byParent[keys[p]] = es
		}
	}
	if refs == nil {
		refs = map[aggregator.ObjectKey][]edge{}
	}
	for _, es := range refs {
		slices.SortFunc(es, func(a, b edge) int { return keyLess(a.Child, b.Child) })
	}
	slices.SortFunc(g.Seeds, keyLess)
	g.Roots, g.Children, g.References = roots, byParent, refs
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

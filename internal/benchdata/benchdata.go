// Package benchdata makes stored spans for measurements, shaped as the aggregator writes them: a
// busy cluster's writes over a stretch of time (the unrelated spans a store holds), and
// Deployment trees of many Pods (the large queries). The Go benchmarks and the cost curves of
// scripts/bench.sh (internal/tools/curves) share them.
package benchdata

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/diff"
)

// WritesConfig shapes Writes.
type WritesConfig struct {
	Cluster    string // default "prod"
	Objects    int    // distinct Pods written (default 20,000), in 50 namespaces
	Batch      int    // spans per emit call (default 5,000)
	FirstIndex int    // the index of the first write: continue an earlier call with its n
	// SnapshotBytes, when positive, adds to every write a snapshot log of about that many bytes
	// of an object's JSON (as field diffs store them), varying from write to write.
	SnapshotBytes int
}

// Writes emits n spans spread evenly over [start, end): writes to cfg.Objects Pods in 50
// namespaces, each object's first write of a window preceded by the window's object span; 1% of
// the writes are a person's patches, 2% failed conflicts, every write carries a diff log. Spans
// are emitted in batches of cfg.Batch; emit may keep them (they are not reused). It returns
// emit's first error.
func Writes(cfg WritesConfig, n int, start, end time.Time, emit func([]*aggregator.Span) error) error {
	if cfg.Cluster == "" {
		cfg.Cluster = "prod"
	}
	if cfg.Objects <= 0 {
		cfg.Objects = 20_000
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 5000
	}
	if n <= 0 {
		return nil
	}
	step := end.Sub(start) / time.Duration(n)
	seen := map[[2]int64]bool{}
	batch := make([]*aggregator.Span, 0, cfg.Batch)
	for j := range n {
		i := cfg.FirstIndex + j
		at := start.Add(time.Duration(j) * step)
		o := i * 7919 % cfg.Objects
		obj := aggregator.ObjectRef{Cluster: cfg.Cluster, Version: "v1", Resource: "pods",
			Namespace: "ns-" + strconv.Itoa(o%50), Name: "pod-" + strconv.Itoa(o)}
		w := aggregator.WindowStart(at, aggregator.DefaultWindow)
		tid := aggregator.TraceIDFor(obj.Key(), w)
		if k := [2]int64{int64(o), w.UnixNano()}; !seen[k] {
			if len(seen) > 4*cfg.Objects {
				clear(seen) // an object span written twice is one span
			}
			seen[k] = true
			batch = append(batch, ObjectSpan(obj, w))
		}
		user, agent, verb, code := "system:serviceaccount:kube-system:replicaset-controller", "kube-controller-manager/v1.37.2", "update", "200"
		switch {
		case i%100 == 0:
			user, agent, verb = "alice", "kubectl/v1.37.2 (linux/amd64)", "patch"
		case i%50 == 1:
			code = "409"
		}
		var sid trace.SpanID
		copy(sid[:], fmt.Sprintf("%08d", i%100_000_000))
		batch = append(batch, &aggregator.Span{TraceID: tid, SpanID: sid, ParentID: aggregator.ObjectSpanID(tid), Kind: aggregator.KindEvent,
			Source: "audit", Name: user + " " + verb, Object: obj, Window: w, Start: at, End: at.Add(5 * time.Millisecond), Error: code != "200",
			Attributes: aggregator.Attrs{{Key: aggregator.AttrVerb, Value: verb}, {Key: aggregator.AttrUser, Value: user},
				{Key: aggregator.AttrUserAgent, Value: agent}, {Key: aggregator.AttrStatusCode, Value: code}, {Key: aggregator.AttrAuditID, Value: strconv.Itoa(i)}},
			Logs: []aggregator.Log{{Time: at, Type: aggregator.LogTypeDiff, Message: "status.phase Pending -> Running",
				Attributes: aggregator.Attrs{{Key: diff.AttrPath, Value: "status.phase"}}}}})
		if cfg.SnapshotBytes > 0 {
			sp := batch[len(batch)-1]
			sp.Logs = append(sp.Logs, aggregator.Log{Time: at, Type: aggregator.LogTypeSnapshot, Message: snapshot(cfg.SnapshotBytes, i)})
		}
		if len(batch) >= cfg.Batch {
			if err := emit(batch); err != nil {
				return err
			}
			batch = make([]*aggregator.Span, 0, cfg.Batch)
		}
	}
	if len(batch) > 0 {
		return emit(batch)
	}
	return nil
}

// ObjectSpan is the object span of o in the window starting at window.
func ObjectSpan(o aggregator.ObjectRef, window time.Time) *aggregator.Span {
	tid := aggregator.TraceIDFor(o.Key(), window)
	return &aggregator.Span{TraceID: tid, SpanID: aggregator.ObjectSpanID(tid), Kind: aggregator.KindObject,
		Source: "object", Name: o.Resource + "/" + o.Name, Object: o, Window: window, Start: window, End: window.Add(aggregator.DefaultWindow)}
}

// Deployment is a Deployment web with one ReplicaSet web-1 and pods Pods, linked as the owner
// linker links them, in namespace ns of cluster, over windows windows starting at w0 (a window
// start): in each window every object has a write or two. It returns the spans of each window.
// Found with resource deployments and name web, the tree has pods+2 objects.
func Deployment(cluster, ns string, pods, windows int, w0 time.Time) [][]*aggregator.Span {
	ref := func(group, resource, name string) aggregator.ObjectRef {
		return aggregator.ObjectRef{Cluster: cluster, Group: group, Version: "v1", Resource: resource, Namespace: ns, Name: name}
	}
	dep, rs := ref("apps", "deployments", "web"), ref("apps", "replicasets", "web-1")
	out := make([][]*aggregator.Span, 0, windows)
	for i := range windows {
		window := w0.Add(time.Duration(i) * aggregator.DefaultWindow)
		var w tree
		w.event(dep, window.Add(time.Minute), fmt.Sprintf("d%d", i))
		w.event(rs, window.Add(time.Minute), fmt.Sprintf("r%d", i))
		w.link(dep, rs, window, "children")
		for p := range pods {
			pod := ref("", "pods", fmt.Sprintf("web-1-%05d", p))
			w.link(rs, pod, window, "children")
			w.event(pod, window.Add(2*time.Minute), fmt.Sprintf("a%d", i))
			w.event(pod, window.Add(3*time.Minute), fmt.Sprintf("b%d", i))
		}
		out = append(out, w.spans)
	}
	return out
}

// tree collects the spans of Deployment.
type tree struct{ spans []*aggregator.Span }

func (w *tree) event(o aggregator.ObjectRef, at time.Time, id string) {
	w.spans = append(w.spans, EventSpan(o, at, id))
}

func (w *tree) link(parent, child aggregator.ObjectRef, window time.Time, class string) {
	w.spans = append(append(w.spans, LinkSpans(parent, child, window, class)...), ObjectSpan(parent, window), ObjectSpan(child, window))
}

// EventSpan is alice's write id of o at at, as the audit consumer's event span.
func EventSpan(o aggregator.ObjectRef, at time.Time, id string) *aggregator.Span {
	window := aggregator.WindowStart(at, aggregator.DefaultWindow)
	tid := aggregator.TraceIDFor(o.Key(), window)
	return &aggregator.Span{TraceID: tid, SpanID: aggregator.EventSpanID(tid, "audit", id), ParentID: aggregator.ObjectSpanID(tid),
		Kind: aggregator.KindEvent, Source: "audit", Name: "alice update " + id, Object: o, Window: window, Start: at, End: at.Add(time.Millisecond),
		Attributes: aggregator.Attrs{{Key: aggregator.AttrUser, Value: "alice"}}}
}

// LinkSpans are the two link spans of parent -> child (class) in the window starting at window:
// the child's to its parent and the parent's to its child.
func LinkSpans(parent, child aggregator.ObjectRef, window time.Time, class string) []*aggregator.Span {
	out := make([]*aggregator.Span, 0, 2)
	for _, side := range []struct {
		holder, target aggregator.ObjectRef
		role           aggregator.Role
	}{{child, parent, aggregator.RoleParent}, {parent, child, aggregator.RoleChild}} {
		tid := aggregator.TraceIDFor(side.holder.Key(), window)
		out = append(out, &aggregator.Span{TraceID: tid, SpanID: aggregator.LinkSpanID(tid, side.target.Key(), side.role),
			ParentID: aggregator.ObjectSpanID(tid), Kind: aggregator.KindLink, Source: "link", Name: side.holder.Resource + "/" + side.holder.Name,
			Object: side.holder, Window: window, Start: window, End: window,
			Link: &aggregator.Link{Target: side.target, Role: side.role, Class: class}})
	}
	return out
}

// snapshot is about n bytes of a Pod's JSON, its values depending on i.
func snapshot(n, i int) string {
	var b strings.Builder
	b.Grow(n + 128)
	b.WriteString(`{"metadata":{"name":"pod-` + strconv.Itoa(i) + `","resourceVersion":"` + strconv.Itoa(1_000_000+i) + `"},"spec":{"containers":[`)
	for c := 0; b.Len() < n; c++ {
		if c > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"c%d","image":"registry.example/app-%d:v%d","resources":{"requests":{"cpu":"%dm","memory":"%dMi"}},"env":[{"name":"SEED","value":"%x"}]}`,
			c, i%97, i%13, 100+i%400, 64+i%512, uint32(i*2654435761+c))
	}
	b.WriteString("]}}")
	return b.String()
}

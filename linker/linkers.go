package linker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	lru "github.com/hashicorp/golang-lru/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/kube"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Linker names, link class and annotation keys.
const (
	ownerLinkerName      = "owner"
	annotationLinkerName = "annotation"

	// classChildren is the class of owner links.
	classChildren = "children"

	// annotationParentLink names an object's parent (see AnnotationLinker).
	annotationParentLink = "kelemetry.io/parent-link"
	// legacyAnnotationParentLink is the predecessor's key, read when annotationParentLink is absent.
	legacyAnnotationParentLink = "kelemetry.kubewharf.io/parent-link"
)

// OwnerLinker links an object to its controlling owner: the ownerReference with controller: true.
// An object whose ownerReferences have no controller gets no link, as the garbage collector's
// other owners are not what made the object. The owner is in the object's cluster; it gets the
// object's namespace when the kube.Mapper says it is namespaced, and none when it is cluster-scoped
// (a Node owning a mirror Pod, a ClusterRole owning a namespaced object).
type OwnerLinker struct {
	mapper  kube.Mapper
	getter  kube.ObjectGetter
	lookups metric.Int64Counter
	sources sourceOptions
}

// NewOwnerLinker returns an OwnerLinker. A nil mapper means a StaticMapper. A nil getter means
// that only the bodies that come with the events are used: an object without one gets no link.
// ts gives the logger and meter provider (unset: slog.Default(), no metrics); a metric that
// cannot be created is logged and not recorded.
func NewOwnerLinker(mapper kube.Mapper, getter kube.ObjectGetter, ts telemetry.Settings) *OwnerLinker {
	if mapper == nil {
		mapper = kube.NewStaticMapper()
	}
	meter := instrument.NewMeter(ts, meterScope)
	l := &OwnerLinker{
		mapper:  mapper,
		getter:  getter,
		lookups: meter.Counter("kelemetry.linker.owner.lookups", "Owner linker lookups by where the object came from: body, getter, not_found, none.", "", sourceSets()...),
		sources: newSourceOptions(),
	}
	logMeterErr(meter, ts.Log().With("linker", ownerLinkerName))
	return l
}

// Name returns "owner".
func (*OwnerLinker) Name() string { return ownerLinkerName }

// ownerReference is the part of a metadata.ownerReferences item the owner linker reads.
type ownerReference struct {
	APIVersion, Kind, Name, UID string
	Controller                  bool
}

// Lookup returns the link to obj's controlling owner, or none.
func (l *OwnerLinker) Lookup(ctx context.Context, obj aggregator.Object) ([]aggregator.Link, error) {
	meta, src, err := loadMetadata(ctx, l.getter, obj, wantOwners)
	l.lookups.Add(ctx, 1, l.sources.of(src))
	if err != nil {
		return nil, fmt.Errorf("owner linker: %s: %w", obj.ObjectRef, err)
	}
	for _, ref := range meta.owners {
		if !ref.Controller {
			continue
		}
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil {
			return nil, fmt.Errorf("owner linker: %s: owner apiVersion: %w", obj.ObjectRef, err)
		}
		gvr, namespaced, err := l.mapper.ResourceFor(ctx, obj.Cluster, gv.WithKind(ref.Kind))
		if err != nil {
			return nil, fmt.Errorf("owner linker: %s: %w", obj.ObjectRef, err)
		}
		target := aggregator.ObjectRef{
			Cluster:  obj.Cluster,
			Group:    gvr.Group,
			Version:  gvr.Version,
			Resource: gvr.Resource,
			Name:     ref.Name,
			UID:      ref.UID,
		}
		if namespaced {
			target.Namespace = obj.Namespace
		}
		return []aggregator.Link{{Target: target, Role: aggregator.RoleParent, Class: classChildren}}, nil
	}
	return nil, nil
}

// AnnotationLinker links an object to the parent named in its kelemetry.io/parent-link
// annotation (or, when that is absent, the predecessor's kelemetry.kubewharf.io/parent-link), a
// JSON object:
//
//	{"cluster":"<default: the object's>","group":"apps","version":"v1","resource":"deployments","namespace":"<empty: cluster-scoped>","name":"web","uid":"<optional>"}
//
// resource and name are required. A value that is not such an object is counted
// (kelemetry.linker.annotation.invalid) and logged at Warn, at most once a minute per object, and
// gives no link and no error: the object itself is fine.
type AnnotationLinker struct {
	getter  kube.ObjectGetter
	logger  *slog.Logger
	now     func() time.Time
	lookups metric.Int64Counter
	invalid metric.Int64Counter
	sources sourceOptions
	reasons map[string]metric.MeasurementOption

	warnedMu sync.Mutex
	warned   *lru.Cache[aggregator.ObjectKey, time.Time] // last Warn per object
}

// parentLink is the value of the parent-link annotation.
type parentLink struct {
	Cluster   string `json:"cluster,omitempty"`
	Group     string `json:"group"`
	Version   string `json:"version,omitempty"`
	Resource  string `json:"resource"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
}

const (
	warnEvery      = time.Minute
	warnMemorySize = 4096
)

// NewAnnotationLinker returns an AnnotationLinker. A nil getter means that only the bodies that
// come with the events are used. ts gives the logger and meter provider (unset: slog.Default(),
// no metrics); a metric that cannot be created is logged and not recorded.
func NewAnnotationLinker(getter kube.ObjectGetter, ts telemetry.Settings) *AnnotationLinker {
	logger := ts.Log().With("linker", annotationLinkerName)
	meter := instrument.NewMeter(ts, meterScope)
	warned, _ := lru.New[aggregator.ObjectKey, time.Time](warnMemorySize) // fails only for size <= 0
	reasonNames := []string{"json", "missing_field", "self"}
	reasonSets := instrument.Sets("reason", reasonNames...)
	reasons := map[string]metric.MeasurementOption{}
	for i, r := range reasonNames {
		reasons[r] = metric.WithAttributeSet(reasonSets[i])
	}
	l := &AnnotationLinker{
		getter:  getter,
		logger:  logger,
		now:     time.Now,
		lookups: meter.Counter("kelemetry.linker.annotation.lookups", "Annotation linker lookups by where the object came from: body, getter, not_found, none.", "", sourceSets()...),
		invalid: meter.Counter("kelemetry.linker.annotation.invalid", "Parent-link annotations that could not be used, by reason: json, missing_field, self.", "", reasonSets...),
		sources: newSourceOptions(),
		reasons: reasons,
		warned:  warned,
	}
	logMeterErr(meter, logger)
	return l
}

// Name returns "annotation".
func (*AnnotationLinker) Name() string { return annotationLinkerName }

// Lookup returns the link to the parent named by obj's annotation, or none.
func (l *AnnotationLinker) Lookup(ctx context.Context, obj aggregator.Object) ([]aggregator.Link, error) {
	meta, src, err := loadMetadata(ctx, l.getter, obj, wantAnnotations)
	l.lookups.Add(ctx, 1, l.sources.of(src))
	if err != nil {
		return nil, fmt.Errorf("annotation linker: %s: %w", obj.ObjectRef, err)
	}
	key, value := annotationParentLink, meta.parentLink
	if value == nil {
		key, value = legacyAnnotationParentLink, meta.legacyLink
	}
	if value == nil {
		return nil, nil
	}
	var link parentLink
	if err := jsonv2.Unmarshal([]byte(*value), &link, jsonv2.MatchCaseInsensitiveNames(true)); err != nil {
		l.reject(ctx, obj, key, "json", err)
		return nil, nil
	}
	if link.Resource == "" || link.Name == "" {
		l.reject(ctx, obj, key, "missing_field", errors.New("resource and name are required"))
		return nil, nil
	}
	if link.Cluster == "" {
		link.Cluster = obj.Cluster
	}
	target := aggregator.ObjectRef{
		Cluster:   link.Cluster,
		Group:     link.Group,
		Version:   link.Version,
		Resource:  link.Resource,
		Namespace: link.Namespace,
		Name:      link.Name,
		UID:       link.UID,
	}
	if target.Key() == obj.Key() {
		l.reject(ctx, obj, key, "self", errors.New("the annotation names the object itself"))
		return nil, nil
	}
	return []aggregator.Link{{Target: target, Role: aggregator.RoleParent}}, nil
}

// reject counts an unusable annotation and logs it, at most once per warnEvery per object.
func (l *AnnotationLinker) reject(ctx context.Context, obj aggregator.Object, key, reason string, err error) {
	l.invalid.Add(ctx, 1, l.reasons[reason])
	now := l.now()
	okey := obj.Key()
	l.warnedMu.Lock()
	last, seen := l.warned.Get(okey)
	quiet := seen && now.Sub(last) < warnEvery
	if !quiet {
		l.warned.Add(okey, now)
	}
	l.warnedMu.Unlock()
	if quiet {
		return
	}
	l.logger.LogAttrs(ctx, slog.LevelWarn, "ignoring invalid parent-link annotation",
		slog.String("object", obj.String()), slog.String("annotation", key),
		slog.String("reason", reason), slog.Any("error", err))
}

// bodySource says where a linker found the object.
type bodySource int

const (
	sourceNone     bodySource = iota // no body and no getter
	sourceBody                       // obj.Body
	sourceGetter                     // kube.ObjectGetter.Get
	sourceNotFound                   // kube.ObjectGetter.Get said the object does not exist
)

type sourceOptions [4]metric.MeasurementOption

// sourceSets are the source attribute sets of the lookup counters, indexed by bodySource.
func sourceSets() []attribute.Set {
	return instrument.Sets("source", "none", "body", "getter", "not_found")
}

func newSourceOptions() sourceOptions {
	var o sourceOptions
	for i, set := range sourceSets() {
		o[i] = metric.WithAttributeSet(set)
	}
	return o
}

func (o *sourceOptions) of(s bodySource) metric.MeasurementOption { return o[s] }

// loadMetadata decodes the metadata of obj (and the members want asks for) from obj.Body when that
// is the object's own body, or else from getter. A missing object or a missing getter give a zero
// linkMeta and no error.
func loadMetadata(ctx context.Context, getter kube.ObjectGetter, obj aggregator.Object, want metaWant) (linkMeta, bodySource, error) {
	if len(obj.Body) > 0 && !bytes.Equal(bytes.TrimSpace(obj.Body), []byte("null")) {
		m, err := decodeMetadata(obj.Body, want)
		if err == nil && ownBody(m, obj) {
			return m, sourceBody, nil
		}
		if getter == nil {
			if err != nil {
				return linkMeta{}, sourceNone, fmt.Errorf("decode body: %w", err)
			}
			return linkMeta{}, sourceNone, nil
		}
	}
	if getter == nil {
		return linkMeta{}, sourceNone, nil
	}
	body, err := getter.Get(ctx, obj.ObjectRef)
	switch {
	case errors.Is(err, kube.ErrObjectNotFound):
		return linkMeta{}, sourceNotFound, nil
	case err != nil:
		return linkMeta{}, sourceGetter, err
	}
	m, err := decodeMetadata(body, want)
	if err != nil {
		return linkMeta{}, sourceGetter, fmt.Errorf("decode fetched body: %w", err)
	}
	return m, sourceGetter, nil
}

// ownBody tells whether a body with this kind and identity is obj's (and not, say, the Status
// or Scale a subresource request answered with).
func ownBody(m linkMeta, obj aggregator.Object) bool {
	if !kube.IsObjectKind(m.kind) {
		return false
	}
	if m.name != "" && obj.Name != "" && m.name != obj.Name {
		return false
	}
	return m.uid == "" || obj.UID == "" || m.uid == obj.UID
}

// meterScope is the instrumentation scope of the package's metrics.
const meterScope = "github.com/kelemetry/kelemetry/linker"

// logMeterErr logs the metrics meter could not create (they are no-ops): a linker works without
// them, so this is not an error of its constructor.
func logMeterErr(meter *instrument.Meter, logger *slog.Logger) {
	if err := meter.Err(); err != nil {
		logger.Error("cannot create metrics", slog.Any("error", err))
	}
}

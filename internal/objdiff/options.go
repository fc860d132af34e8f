package objdiff

import (
	"crypto/rand"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/kelemetry/kelemetry/diff"
)

// defaultMaxLCS bounds the cells of the table that aligns unkeyed lists (old length times new
// length); longer lists are aligned by index after their common head and tail.
const defaultMaxLCS = 1 << 16

// defaultMergeKeys are the merge keys of well-known list fields, by field name, in order of
// preference: the first key that every item has, with unique values, is used. They follow the
// patchMergeKey tags of the Kubernetes API types.
var defaultMergeKeys = map[string][]string{
	"containers":                 {"name"},
	"initContainers":             {"name"},
	"ephemeralContainers":        {"name"},
	"containerStatuses":          {"name"},
	"initContainerStatuses":      {"name"},
	"ephemeralContainerStatuses": {"name"},
	"env":                        {"name"},
	"volumes":                    {"name"},
	"imagePullSecrets":           {"name"},
	"resourceClaims":             {"name"},
	"resourceClaimStatuses":      {"name"},
	"webhooks":                   {"name"},
	"ports":                      {"containerPort", "port", "name"},
	"volumeMounts":               {"mountPath", "name"},
	"volumeDevices":              {"devicePath"},
	"conditions":                 {"type"},
	"ownerReferences":            {"uid"},
	"taints":                     {"key"},
	"addresses":                  {"type", "ip"},
	"hostAliases":                {"ip"},
	"podIPs":                     {"ip"},
	"hostIPs":                    {"ip"},
	"readinessGates":             {"conditionType"},
	"topologySpreadConstraints":  {"topologyKey"},
}

// genericMergeKeys are tried on any list of objects without a known merge key.
var genericMergeKeys = []string{"name"}

var secrets = diff.Resource{Resource: "secrets"}

// lastAppliedPath is the annotation kubectl apply writes the applied manifest to: on a Secret it
// holds data and stringData in the clear, so it is redacted with them.
const lastAppliedPath = `metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]`

// Differ compares objects with fixed options. It is safe for concurrent use.
type Differ struct {
	ignore       map[string]struct{}
	mergeByPath  map[string][]string
	mergeByField map[string][]string
	rules        []compiledRule
	maxLCS       int
	hmacKey      []byte
	plans        sync.Map // Resource -> *plan
}

type compiledRule struct {
	res   diff.Resource
	all   bool
	paths []string
	re    *regexp.Regexp
}

// normPath writes list items as "[]".
func normPath(p string) string { return strings.ReplaceAll(p, "[*]", "[]") }

// New compiles opts.
func New(opts diff.Options) (*Differ, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	d := &Differ{
		ignore:       map[string]struct{}{},
		mergeByPath:  map[string][]string{},
		mergeByField: map[string][]string{},
		maxLCS:       opts.MaxLCS,
		hmacKey:      make([]byte, 32),
	}
	if d.maxLCS == 0 {
		d.maxLCS = defaultMaxLCS
	}
	if _, err := rand.Read(d.hmacKey); err != nil {
		return nil, fmt.Errorf("diff: redaction key: %w", err)
	}
	ignore := opts.Ignore
	if ignore == nil {
		ignore = diff.DefaultIgnore
	}
	for _, p := range ignore {
		d.ignore[normPath(p)] = struct{}{}
	}
	for k, v := range defaultMergeKeys {
		d.mergeByField[k] = v
	}
	for k, v := range opts.MergeKeys {
		if strings.ContainsAny(k, ".[") {
			d.mergeByPath[normPath(k)] = v
		} else {
			d.mergeByField[k] = v
		}
	}
	for _, r := range opts.Redact {
		res, _ := diff.ParseResource(r.Resource) // validated
		cr := compiledRule{res: res, all: r.Resource == ""}
		for _, p := range r.Paths {
			cr.paths = append(cr.paths, normPath(p))
		}
		if r.PathRegex != "" {
			cr.re = regexp.MustCompile(r.PathRegex) // validated
		}
		d.rules = append(d.rules, cr)
	}
	return d, nil
}

// plan is what applies to one resource: the paths whose values are hidden, the regexes matched
// against full paths, and the prefixes under which rewriting must descend.
type plan struct {
	redact   map[string]struct{}
	regexes  []*regexp.Regexp
	descend  map[string]struct{} // proper prefixes of redact and strip paths
	anyRegex bool
	// stripOnly: nothing is redacted, so a snapshot only drops metadata.managedFields.
	stripOnly bool
}

// stripPaths are removed from snapshots.
var stripPaths = []string{"metadata.managedFields"}

func (d *Differ) planFor(res diff.Resource) *plan {
	if p, ok := d.plans.Load(res); ok {
		return p.(*plan)
	}
	p := &plan{redact: map[string]struct{}{}, descend: map[string]struct{}{}}
	if res == secrets {
		p.redact["data"] = struct{}{}
		p.redact["stringData"] = struct{}{}
		p.redact[lastAppliedPath] = struct{}{}
	}
	for _, r := range d.rules {
		if !r.all && r.res != res {
			continue
		}
		for _, path := range r.paths {
			p.redact[path] = struct{}{}
		}
		if r.re != nil {
			p.regexes = append(p.regexes, r.re)
		}
	}
	p.anyRegex = len(p.regexes) > 0
	p.stripOnly = !p.anyRegex && len(p.redact) == 0
	addPrefixes := func(path string) {
		for i := 0; i < len(path); i++ {
			if path[i] == '.' || path[i] == '[' {
				p.descend[path[:i]] = struct{}{}
			}
		}
		p.descend[""] = struct{}{}
	}
	for path := range p.redact {
		addPrefixes(path)
	}
	for _, path := range stripPaths {
		addPrefixes(path)
	}
	// Bound the cache: resources are few, but guard against unbounded distinct inputs.
	if n := d.planCount(); n < 4096 {
		d.plans.Store(res, p)
	}
	return p
}

func (d *Differ) planCount() int {
	n := 0
	d.plans.Range(func(any, any) bool { n++; return n < 4096 })
	return n
}

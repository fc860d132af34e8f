package kelemetrix

import (
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/kelemetry/kelemetry/audit/auditv1"
)

// Tag names: the labels and tag filters a metric may use.
const (
	tagCluster         = "clusterName"     // the cluster the event came from (named "cluster" before: see renamedTags)
	tagUser            = "user"            // the impersonated user, else the user; system:node:* is folded to system:node
	tagUserAgent       = "userAgent"       // the user agent's component: "kube-controller-manager/v1.31.0 (...)" is kube-controller-manager
	tagVerb            = "verb"            // get, list, watch, create, update, patch, delete, ...
	tagCode            = "code"            // the HTTP status code ("" before the response)
	tagCodeClass       = "codeClass"       // 2xx, 3xx, 4xx or 5xx ("" before the response)
	tagErrorReason     = "errorReason"     // the failure's metav1 StatusReason (NotFound, Conflict, ...), "" on success
	tagGroup           = "group"           // the API group ("" is core)
	tagVersion         = "version"         // the API version
	tagResource        = "resource"        // the resource ("" for a non-resource URL)
	tagSubresource     = "subresource"     // the subresource (status, scale, binding, ...)
	tagNamespace       = "namespace"       // the namespace
	tagName            = "name"            // the object's name
	tagResourceVersion = "resourceVersion" // the request's resourceVersion parameter: "zero" ("0"), "empty" (none) or "other"
	tagHasSelector     = "hasSelector"     // "true" when the request has a labelSelector or fieldSelector
	tagStage           = "stage"           // the audit stage
)

// maxTagLen bounds a tag value taken from the client (user, user agent): a longer one is cut.
const maxTagLen = 128

// tagID numbers the tags, indexing the per-event cache of their values.
type tagID uint8

// tag is one tag provider.
type tag struct {
	name  string
	value func(cluster string, ev *auditv1.Event) string
}

// tags are the tag providers, in tagID order.
var tags = []tag{
	{tagCluster, func(cluster string, _ *auditv1.Event) string { return cluster }},
	{tagUser, userTag},
	{tagUserAgent, func(_ string, ev *auditv1.Event) string { return userAgentComponent(ev.UserAgent) }},
	{tagVerb, func(_ string, ev *auditv1.Event) string { return ev.Verb }},
	{tagCode, func(_ string, ev *auditv1.Event) string {
		if ev.ResponseStatus == nil || ev.ResponseStatus.Code == 0 {
			return ""
		}
		return strconv.Itoa(int(ev.ResponseStatus.Code))
	}},
	{tagCodeClass, func(_ string, ev *auditv1.Event) string {
		if ev.ResponseStatus == nil {
			return ""
		}
		return codeClass(ev.ResponseStatus.Code)
	}},
	{tagErrorReason, func(_ string, ev *auditv1.Event) string {
		st := ev.ResponseStatus
		if st == nil || (st.Code > 0 && st.Code < 400) {
			return ""
		}
		return clip(st.Reason)
	}},
	{tagGroup, func(_ string, ev *auditv1.Event) string { return ref(ev).APIGroup }},
	{tagVersion, func(_ string, ev *auditv1.Event) string { return ref(ev).APIVersion }},
	{tagResource, func(_ string, ev *auditv1.Event) string { return ref(ev).Resource }},
	{tagSubresource, func(_ string, ev *auditv1.Event) string { return ref(ev).Subresource }},
	{tagNamespace, func(_ string, ev *auditv1.Event) string { return ref(ev).Namespace }},
	{tagName, func(_ string, ev *auditv1.Event) string { return ref(ev).Name }},
	{tagResourceVersion, func(_ string, ev *auditv1.Event) string {
		rv, ok := queryParam(ev.RequestURI, "resourceVersion")
		switch {
		case !ok || rv == "":
			return "empty"
		case rv == "0":
			return "zero"
		default:
			return "other"
		}
	}},
	{tagHasSelector, func(_ string, ev *auditv1.Event) string {
		l, _ := queryParam(ev.RequestURI, "labelSelector")
		f, _ := queryParam(ev.RequestURI, "fieldSelector")
		return strconv.FormatBool(l != "" || f != "")
	}},
	{tagStage, func(_ string, ev *auditv1.Event) string { return ev.Stage }},
}

// tagNames returns the names of the tags, sorted.
func tagNames() []string {
	names := make([]string, len(tags))
	for i, t := range tags {
		names[i] = t.name
	}
	slices.Sort(names)
	return names
}

// renamedTags maps a tag's former name to its name. "cluster" became "clusterName" because a
// label "cluster" collides with the one multi-cluster Prometheus setups add to every series of a
// target (Prometheus then renames ours to exported_cluster and a dashboard filters the wrong
// label). A former name still works; New warns once.
var renamedTags = map[string]string{"cluster": tagCluster}

// tagByName finds a tag by its name or its former name (renamedTags).
func tagByName(name string) (tagID, bool) {
	if now, ok := renamedTags[name]; ok {
		name = now
	}
	for i, t := range tags {
		if t.name == name {
			return tagID(i), true
		}
	}
	return 0, false
}

var noRef auditv1.ObjectReference

func ref(ev *auditv1.Event) *auditv1.ObjectReference {
	if ev.ObjectRef == nil {
		return &noRef
	}
	return ev.ObjectRef
}

// userTag is the impersonated user, else the authenticated one, with every node's user folded into
// system:node.
func userTag(_ string, ev *auditv1.Event) string {
	name := ev.User.Username
	if ev.ImpersonatedUser != nil && ev.ImpersonatedUser.Username != "" {
		name = ev.ImpersonatedUser.Username
	}
	if strings.HasPrefix(name, "system:node:") {
		return "system:node"
	}
	return clip(name)
}

// userAgentComponent reduces a user agent to its component: what precedes the first "/" or
// space ("kube-controller-manager/v1.31.0 (linux/amd64) kubernetes/abc/..." is
// kube-controller-manager), cut to maxTagLen bytes.
func userAgentComponent(ua string) string {
	ua = strings.TrimSpace(ua)
	if i := strings.IndexAny(ua, "/ "); i >= 0 {
		ua = ua[:i]
	}
	return clip(ua)
}

// codeClass is "2xx" for 200-299 and so on, "" for a code out of 100-599.
func codeClass(code int32) string {
	switch {
	case code >= 100 && code < 200:
		return "1xx"
	case code >= 200 && code < 300:
		return "2xx"
	case code >= 300 && code < 400:
		return "3xx"
	case code >= 400 && code < 500:
		return "4xx"
	case code >= 500 && code < 600:
		return "5xx"
	}
	return ""
}

// clip cuts s to maxTagLen bytes at a UTF-8 boundary.
func clip(s string) string {
	if len(s) <= maxTagLen {
		return s
	}
	n := maxTagLen
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// queryParam returns the value of the query parameter key of uri (its first occurrence) without
// allocating when it needs no unescaping; ok is false when the parameter is absent.
func queryParam(uri, key string) (value string, ok bool) {
	i := strings.IndexByte(uri, '?')
	if i < 0 {
		return "", false
	}
	q := uri[i+1:]
	if j := strings.IndexByte(q, '#'); j >= 0 {
		q = q[:j]
	}
	for q != "" {
		var pair string
		pair, q, _ = strings.Cut(q, "&")
		k, v, _ := strings.Cut(pair, "=")
		if k != key {
			continue
		}
		if strings.ContainsAny(v, "%+") {
			if u, err := url.QueryUnescape(v); err == nil {
				v = u
			}
		}
		return v, true
	}
	return "", false
}

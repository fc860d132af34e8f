package query_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/internal/frontendtest"
)

// auditBody is one full object a write's response carried, read straight from the audit log.
type auditBody struct {
	at     time.Time
	body   map[string]any
	create bool
}

// auditBodies reads the rollout's audit log without any Kelemetry code: for each object
// (group/resource/namespace/name), the object after each write whose response is the object
// itself, or that binds a Pod (the object before it with spec.nodeName set), in time order.
func auditBodies(t *testing.T) map[string][]auditBody {
	t.Helper()
	f, err := os.Open(frontendtest.RolloutAuditLog())
	require.NoError(t, err)
	defer f.Close()
	type record struct {
		auditBody
		// change, for a write whose response is not the object, changes the object before it
		change func(map[string]any)
	}
	records := map[string][]record{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var ev struct {
			Stage     string    `json:"stage"`
			Verb      string    `json:"verb"`
			StageTime time.Time `json:"stageTimestamp"`
			ObjectRef struct {
				Resource, Namespace, Name, Subresource string
				APIGroup                               string `json:"apiGroup"`
			} `json:"objectRef"`
			Request  json.RawMessage `json:"requestObject"`
			Response json.RawMessage `json:"responseObject"`
			Status   struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &ev))
		ref := ev.ObjectRef
		if ev.Stage != "ResponseComplete" || ev.Status.Code >= 300 {
			continue
		}
		k := ref.APIGroup + "/" + ref.Resource + "/" + ref.Namespace + "/"
		if ref.Subresource == "binding" && ev.Verb == "create" {
			var b struct {
				Target struct{ Name string } `json:"target"`
			}
			require.NoError(t, json.Unmarshal(ev.Request, &b))
			records[k+ref.Name] = append(records[k+ref.Name], record{auditBody: auditBody{at: ev.StageTime}, change: func(o map[string]any) {
				o["spec"].(map[string]any)["nodeName"] = b.Target.Name
			}})
			continue
		}
		if ref.Subresource == "scale" && (ev.Verb == "update" || ev.Verb == "patch") {
			dec := json.NewDecoder(bytes.NewReader(ev.Response))
			dec.UseNumber()
			var scale struct {
				Metadata struct{ ResourceVersion string } `json:"metadata"`
				Spec     struct{ Replicas json.Number }   `json:"spec"`
			}
			require.NoError(t, dec.Decode(&scale))
			records[k+ref.Name] = append(records[k+ref.Name], record{auditBody: auditBody{at: ev.StageTime}, change: func(o map[string]any) {
				o["spec"].(map[string]any)["replicas"] = scale.Spec.Replicas
				o["metadata"].(map[string]any)["resourceVersion"] = scale.Metadata.ResourceVersion
			}})
			continue
		}
		if len(ev.Response) == 0 || (ev.Verb != "create" && ev.Verb != "update" && ev.Verb != "patch") {
			continue
		}
		if ref.Subresource != "" && ref.Subresource != "status" {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(ev.Response))
		dec.UseNumber()
		var body map[string]any
		require.NoError(t, dec.Decode(&body))
		meta, _ := body["metadata"].(map[string]any)
		if ref.Name == "" && ev.Verb == "create" && meta != nil {
			ref.Name, _ = meta["name"].(string) // created with generateName
		}
		if ref.Name == "" || meta == nil || meta["name"] != ref.Name {
			continue // a Status, a Scale, ...
		}
		records[k+ref.Name] = append(records[k+ref.Name], record{auditBody: auditBody{at: ev.StageTime, body: body, create: ev.Verb == "create"}})
	}
	require.NoError(t, sc.Err())
	out := map[string][]auditBody{}
	for k, rs := range records {
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].at.Before(rs[j].at) })
		var bs []auditBody
		for _, r := range rs {
			if r.change != nil {
				if len(bs) == 0 {
					continue
				}
				b := auditBody{at: r.at, body: comparable(bs[len(bs)-1].body)}
				r.change(b.body)
				bs = append(bs, b)
				continue
			}
			bs = append(bs, r.auditBody)
		}
		if len(bs) > 0 {
			out[k] = bs
		}
	}
	return out
}

// comparable drops what no snapshot or diff carries: managedFields (never stored) and
// metadata.generation (a bookkeeping field the diffs ignore; the API lists it as untracked).
func comparable(body map[string]any) map[string]any {
	b, _ := json.Marshal(body)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var c map[string]any
	_ = dec.Decode(&c)
	if meta, ok := c["metadata"].(map[string]any); ok {
		delete(meta, "managedFields")
		delete(meta, "generation")
	}
	return c
}

// sortKeyed sorts the list at a dotted path by its items' type or name: the API says the order
// of those lists' items is not known.
func sortKeyed(t *testing.T, doc map[string]any, path string) {
	t.Helper()
	require.NotContains(t, path, "[", "the test sorts lists at plain paths only")
	parts := strings.Split(path, ".")
	m := doc
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			return
		}
		m = next
	}
	list, ok := m[parts[len(parts)-1]].([]any)
	if !ok {
		return
	}
	key := func(v any) string {
		item, _ := v.(map[string]any)
		return fmt.Sprint(item["type"], "/", item["name"])
	}
	sort.SliceStable(list, func(i, j int) bool { return key(list[i]) < key(list[j]) })
}

type objectState struct {
	Data struct {
		Body   json.RawMessage `json:"body"`
		Source struct {
			SnapshotTime    time.Time `json:"snapshotTime"`
			SnapshotKind    string    `json:"snapshotKind"`
			WritesApplied   int       `json:"writesApplied"`
			ResourceVersion string    `json:"resourceVersion"`
		} `json:"source"`
		Gaps []struct {
			Path    string `json:"path"`
			Message string `json:"message"`
		} `json:"gaps"`
		Untracked []string `json:"untracked"`
		Unordered []string `json:"unordered"`
	} `json:"data"`
	Errors []struct {
		Code int    `json:"code"`
		Msg  string `json:"msg"`
	} `json:"errors"`
}

func objectAtURL(srv, group, resource, ns, name string, at time.Time) string {
	v := url.Values{"cluster": {"test"}, "group": {group}, "resource": {resource}, "namespace": {ns}, "name": {name},
		"time": {at.Format(time.RFC3339Nano)}}
	return srv + "/api/objects/at?" + v.Encode()
}

func getJSON(t *testing.T, u string, out any) int {
	t.Helper()
	code, body := fetch(t, u)
	require.NoError(t, json.Unmarshal(body, out), string(body))
	return code
}

func decodeBody(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	require.NoError(t, dec.Decode(&m), string(raw))
	return m
}

// TestObjectAtRollout reconstructs every object of the rollout at the time of each of its
// writes and in between, and compares with the object as the audit log's response bodies show
// it at that time.
func TestObjectAtRollout(t *testing.T) {
	_, srv := newAPI(t, rollout(t))
	bodies := auditBodies(t)
	require.NotEmpty(t, bodies)
	objects, moments := 0, 0
	for k, bs := range bodies {
		parts := strings.SplitN(k, "/", 4)
		group, resource, ns, name := parts[0], parts[1], parts[2], parts[3]
		if !bs[0].create {
			// Only updates were recorded (a Node): no snapshot is stored, so there is no
			// history to start from.
			var st objectState
			code := getJSON(t, objectAtURL(srv.URL, group, resource, ns, name, bs[len(bs)-1].at), &st)
			assert.Equal(t, http.StatusNotFound, code, k)
			if assert.NotEmpty(t, st.Errors, k) {
				// It says what is missing and why: the writes stored carry diffs only.
				msg := st.Errors[0].Msg
				assert.Contains(t, msg, "no snapshot stored", k)
				assert.Contains(t, msg, "stored only at its creation (creation snapshot) and deletion", k)
				assert.Contains(t, msg, "its creation was not recorded", k)
				assert.Contains(t, msg, fmt.Sprintf("%d stored writes from %s to %s carry diffs only", len(bs),
					bs[0].at.UTC().Format(time.RFC3339Nano), bs[len(bs)-1].at.UTC().Format(time.RFC3339Nano)), k)
			}
			continue
		}
		objects++
		for i, b := range bs {
			// At the write, and just before the next one.
			ats := []time.Time{b.at}
			if i+1 < len(bs) && bs[i+1].at.Sub(b.at) > time.Millisecond {
				ats = append(ats, bs[i+1].at.Add(-time.Microsecond))
			}
			for _, at := range ats {
				moments++
				var st objectState
				code := getJSON(t, objectAtURL(srv.URL, group, resource, ns, name, at), &st)
				require.Equal(t, http.StatusOK, code, "%s at %s: %+v", k, at, st.Errors)
				assert.Empty(t, st.Data.Gaps, "%s at %s", k, at)
				want := comparable(b.body)
				got := comparable(decodeBody(t, st.Data.Body))
				for _, p := range st.Data.Unordered {
					sortKeyed(t, want, p)
					sortKeyed(t, got, p)
				}
				meta := want["metadata"].(map[string]any)
				if slices.Contains(st.Data.Untracked, "metadata.resourceVersion") {
					// After a write of the scale subresource: its version is not stored.
					assert.Empty(t, st.Data.Source.ResourceVersion)
					delete(meta, "resourceVersion")
				} else {
					assert.Equal(t, meta["resourceVersion"], st.Data.Source.ResourceVersion, "%s at %s", k, at)
				}
				if !assert.Equal(t, want, got, "%s at %s (write %d of %d)", k, at, i+1, len(bs)) {
					return
				}
				assert.Contains(t, st.Data.Untracked, "metadata.generation")
			}
		}
	}
	t.Logf("%d objects at %d moments", objects, moments)
	assert.GreaterOrEqual(t, objects, 10)
}

// TestObjectAtSource checks where a reconstruction comes from: the Deployment's creation
// snapshot and the writes after it.
func TestObjectAtSource(t *testing.T) {
	_, srv := newAPI(t, rollout(t))
	bs := auditBodies(t)["apps/deployments/default/demo"]
	require.Greater(t, len(bs), 5)
	var st objectState
	last := bs[len(bs)-1]
	require.Equal(t, http.StatusOK, getJSON(t, objectAtURL(srv.URL, "apps", "deployments", "default", "demo", last.at), &st))
	assert.Equal(t, "creation", st.Data.Source.SnapshotKind)
	assert.True(t, st.Data.Source.SnapshotTime.Equal(bs[0].at), "snapshot at %s, created at %s", st.Data.Source.SnapshotTime, bs[0].at)
	// Every write with a full response, and the scale subresource's (no body of its own).
	assert.GreaterOrEqual(t, st.Data.Source.WritesApplied, len(bs)-1)

	// The path form, with "-" for the core group, and Unix milliseconds.
	pods := auditBodies(t)
	for k, pbs := range pods {
		if !strings.HasPrefix(k, "/pods/default/") {
			continue
		}
		name := strings.TrimPrefix(k, "/pods/default/")
		u := fmt.Sprintf("%s/api/objects/test/-/pods/default/%s/at?time=%d", srv.URL, name, pbs[len(pbs)-1].at.UnixMilli()+1)
		var ps objectState
		require.Equal(t, http.StatusOK, getJSON(t, u, &ps), "%+v", ps.Errors)
		assert.Equal(t, comparable(pbs[len(pbs)-1].body), comparable(decodeBody(t, ps.Data.Body)))
		break
	}
}

// TestObjectDiffRollout asks for the changes of the Deployment between its creation and the
// end of the rollout and compares with the two response bodies.
func TestObjectDiffRollout(t *testing.T) {
	_, srv := newAPI(t, rollout(t))
	bs := auditBodies(t)["apps/deployments/default/demo"]
	require.Greater(t, len(bs), 2)
	from, to := bs[0], bs[len(bs)-1]
	v := url.Values{"cluster": {"test"}, "group": {"apps"}, "resource": {"deployments"}, "namespace": {"default"}, "name": {"demo"},
		"from": {strconv.FormatInt(from.at.UnixMilli()+1, 10)}, "to": {to.at.Format(time.RFC3339Nano)}}
	var resp struct {
		Data struct {
			Changes []struct {
				Path string          `json:"path"`
				Op   string          `json:"op"`
				Old  json.RawMessage `json:"old"`
				New  json.RawMessage `json:"new"`
			} `json:"changes"`
		} `json:"data"`
	}
	require.Equal(t, http.StatusOK, getJSON(t, srv.URL+"/api/objects/diff?"+v.Encode(), &resp))
	changes := map[string][2]string{}
	for _, c := range resp.Data.Changes {
		changes[c.Path] = [2]string{string(c.Old), string(c.New)}
	}
	// Independently: the image the rollout changed, and the status counters.
	image := func(b map[string]any) string {
		c := b["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0]
		return c.(map[string]any)["image"].(string)
	}
	require.NotEqual(t, image(from.body), image(to.body))
	assert.Equal(t, [2]string{strconv.Quote(image(from.body)), strconv.Quote(image(to.body))},
		changes["spec.template.spec.containers[name=alpine].image"], "%+v", resp.Data.Changes)
	for _, c := range resp.Data.Changes {
		assert.False(t, strings.HasPrefix(c.Path, "metadata.managedFields") || c.Path == "metadata.resourceVersion" || c.Path == "metadata.generation", c.Path)
	}

	// Bad parameters and times outside the stored history.
	bad := []struct {
		query string
		code  int
	}{
		{"resource=deployments&name=demo&cluster=test&group=apps&namespace=default&from=x&to=1", http.StatusBadRequest},
		{"resource=deployments&name=demo&cluster=test&group=apps&namespace=default&from=2&to=1", http.StatusBadRequest},
		{"name=demo&from=1&to=2", http.StatusBadRequest},
		{"resource=deployments&name=demo&cluster=test&group=apps&namespace=default&to=1", http.StatusBadRequest},
		{"resource=deployments&name=demo&cluster=test&group=apps&namespace=default&from=1&to=" + strconv.FormatInt(to.at.UnixMilli(), 10), http.StatusNotFound},
	}
	for _, b := range bad {
		var e objectState
		assert.Equal(t, b.code, getJSON(t, srv.URL+"/api/objects/diff?"+b.query, &e), b.query)
		assert.NotEmpty(t, e.Errors, b.query)
	}
}

// TestObjectAtErrors: 400 for bad parameters, 404 before the creation and for an unknown
// object.
func TestObjectAtErrors(t *testing.T) {
	_, srv := newAPI(t, rollout(t))
	bs := auditBodies(t)["apps/deployments/default/demo"]
	cases := []struct {
		name, url string
		code      int
		msg       string
	}{
		{"no time", srv.URL + "/api/objects/at?resource=deployments&name=demo", http.StatusBadRequest, "time"},
		{"bad time", srv.URL + "/api/objects/at?resource=deployments&name=demo&time=yesterday", http.StatusBadRequest, "time"},
		{"no name", srv.URL + "/api/objects/at?resource=deployments&time=1", http.StatusBadRequest, "name"},
		{"before creation", objectAtURL(srv.URL, "apps", "deployments", "default", "demo", bs[0].at.Add(-time.Second)), http.StatusNotFound, "no snapshot"},
		{"before any snapshot", objectAtURL(srv.URL, "apps", "deployments", "default", "demo", bs[0].at.Add(-time.Millisecond)), http.StatusNotFound, "no snapshot"},
		{"unknown object", objectAtURL(srv.URL, "apps", "deployments", "default", "nope", bs[0].at), http.StatusNotFound, "not found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var st objectState
			assert.Equal(t, c.code, getJSON(t, c.url, &st))
			require.NotEmpty(t, st.Errors)
			assert.Contains(t, st.Errors[0].Msg, c.msg)
		})
	}
}

package query_test

import (
	"bufio"
	"cmp"
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/internal/frontendtest"
	"github.com/kelemetry/kelemetry/internal/query"
)

// criticalOf searches the rollout's Deployment in full-tree mode and fetches the critical path
// of the trace ID the Jaeger API returned.
func criticalOf(t *testing.T, srvURL string) query.CriticalPath {
	t.Helper()
	got := traces(t, searchURL(srvURL, "tracing [full tree]", map[string]string{"resource": "deployments", "name": "demo"}))
	require.Len(t, got, 1)
	code, env := call(t, srvURL+"/api/critical-path/"+got[0].TraceID)
	require.Equal(t, http.StatusOK, code)
	var cp query.CriticalPath
	require.NoError(t, json.Unmarshal(env.Data, &cp))
	require.Equal(t, got[0].TraceID, cp.TraceID)
	return cp
}

// auditWrite is one successful write of the recorded rollout, read straight from the audit log.
type auditWrite struct {
	verb, user, resource, sub, name string
	received, completed             time.Time
	// owner and ownerResource name the object's owner (its ownerReferences, as any of its
	// response bodies shows them); specChanged says the write created the object or changed its
	// spec (the response's spec differs from the previous response's, or no previous one).
	owner, ownerResource string
	specChanged          bool
	kind                 string
	spec                 any
}

// rolloutWrites reads the successful writes of the rollout's tree (Deployment demo, its
// ReplicaSets and Pods) from testdata/rollout/audit.jsonl, in the order they arrived.
func rolloutWrites(t *testing.T) []auditWrite {
	t.Helper()
	f, err := os.Open(frontendtest.RolloutAuditLog())
	require.NoError(t, err)
	defer f.Close()
	var out []auditWrite
	owners := map[string][2]string{} // resource/name -> owner's resource and name
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var ev struct {
			Verb string `json:"verb"`
			User struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef struct {
				Resource, Subresource, Name string
			} `json:"objectRef"`
			ResponseStatus struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
			ResponseObject struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name            string `json:"name"`
					OwnerReferences []struct {
						Kind, Name string
					} `json:"ownerReferences"`
				} `json:"metadata"`
				Spec any `json:"spec"`
			} `json:"responseObject"`
			RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
			StageTimestamp           time.Time `json:"stageTimestamp"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &ev))
		switch ev.Verb {
		case "create", "update", "patch", "delete":
		default:
			continue
		}
		name := ev.ObjectRef.Name
		if name == "" {
			name = ev.ResponseObject.Metadata.Name
		}
		r := ev.ObjectRef.Resource
		inTree := (r == "deployments" && name == "demo") || ((r == "replicasets" || r == "pods") && strings.HasPrefix(name, "demo-"))
		if !inTree || ev.ResponseStatus.Code >= 300 {
			continue
		}
		w := auditWrite{verb: ev.Verb, user: ev.User.Username, resource: r, sub: ev.ObjectRef.Subresource, name: name,
			received: ev.RequestReceivedTimestamp, completed: ev.StageTimestamp, kind: ev.ResponseObject.Kind, spec: ev.ResponseObject.Spec}
		for _, o := range ev.ResponseObject.Metadata.OwnerReferences {
			owners[r+"/"+name] = [2]string{map[string]string{"Deployment": "deployments", "ReplicaSet": "replicasets"}[o.Kind], o.Name}
		}
		out = append(out, w)
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, out)
	// A reaction's cause is the latest write that arrived before it.
	slices.SortStableFunc(out, func(a, b auditWrite) int {
		return cmp.Or(a.received.Compare(b.received), a.completed.Compare(b.completed))
	})
	specs := map[string]any{}
	for i := range out {
		w := &out[i]
		key := w.resource + "/" + w.name
		if o, ok := owners[key]; ok {
			w.ownerResource, w.owner = o[0], o[1]
		} else {
			require.Equal(t, "deployments", w.resource, "%s has an owner", key)
		}
		prev, known := specs[key]
		switch {
		case w.verb == "delete":
		case w.kind == "Scale":
			// The scale subresource answers a Scale: its spec.replicas is the object's.
			cur, _ := prev.(map[string]any)
			replicas := w.spec.(map[string]any)["replicas"]
			w.specChanged = !known || !reflect.DeepEqual(cur["replicas"], replicas)
			if cur != nil {
				next := maps.Clone(cur)
				next["replicas"] = replicas
				specs[key] = next
			}
		case w.spec != nil:
			w.specChanged = w.verb == "create" || !known || !reflect.DeepEqual(prev, w.spec)
			specs[key] = w.spec
		case w.sub == "binding":
			w.specChanged = true // spec.nodeName
		}
	}
	return out
}

// TestCriticalPathRollout: the critical path of the recorded rollout runs from the Deployment's
// creation to the last write of its tree, names each step's user and controller, and follows the
// controllers' chain (ReplicaSet by the deployment controller, Pod by the ReplicaSet controller,
// binding by the scheduler, status by the kubelet's stand-in kwok).
func TestCriticalPathRollout(t *testing.T) {
	srv := newUIAPI(t, rollout(t), query.Config{})
	cp := criticalOf(t, srv.URL)
	writes := rolloutWrites(t)

	require.NotEmpty(t, cp.Steps)
	first, last := cp.Steps[0], cp.Steps[len(cp.Steps)-1]
	// The first write of the root: admin creates the Deployment.
	assert.Equal(t, "admin", first.User)
	assert.Equal(t, "create", first.Verb)
	assert.Equal(t, "deployments", first.Object.Resource)
	assert.True(t, writes[0].received.Equal(first.Time), "starts at the audit log's first write %s, got %s", writes[0].received, first.Time)
	// The last write of the tree, by completion time.
	end := writes[0]
	for _, w := range writes {
		if !w.completed.Before(end.completed) {
			end = w
		}
	}
	assert.True(t, end.completed.Equal(last.End), "ends at %s, got %s", end.completed, last.End)
	assert.Equal(t, end.user, last.User)
	assert.Equal(t, end.name, last.Object.Name)
	assert.InDelta(t, end.completed.Sub(writes[0].received).Seconds(), cp.DurationSeconds, 1e-9)

	// The operator's pauses between kubectl commands are waiting for a person, not a controller's
	// reaction: the headline is the slowest controller reaction. On kwok no controller was slow:
	// each reacted within 100 ms, the deployment-controller's scaling during the image change
	// included, which follows the new Pods becoming available (the ReplicaSets' status), not the
	// image change half a second before.
	require.NotNil(t, cp.Slowest)
	assert.False(t, cp.Slowest.Person)
	assert.NotEqual(t, "admin", cp.Slowest.Controller)
	assert.Less(t, cp.Slowest.WaitSeconds, 0.1, "%+v", cp.Slowest)
	rollouts := 0
	for _, s := range cp.Steps {
		if s.Rule == "deployment-rollout" {
			rollouts++
			assert.Equal(t, "deployment-controller", s.Controller)
			assert.Equal(t, "replicasets", s.Object.Resource)
		}
	}
	assert.Positive(t, rollouts, "the image change's scaling steps follow the ReplicaSets' status")
	personWait := 0.0
	for _, s := range cp.Steps {
		assert.Equal(t, s.User == "admin", s.Person, "%s %s: a person's step", s.User, s.Verb)
		if s.Person {
			personWait += s.WaitSeconds
		} else if s.Rule != "start" {
			assert.LessOrEqual(t, s.WaitSeconds, cp.Slowest.WaitSeconds, "no controller step waited longer")
		}
	}
	assert.InDelta(t, personWait, cp.PersonWaitSeconds, 1e-9)
	assert.Greater(t, cp.PersonWaitSeconds, 15.0, "the operator's four pauses of about 5 s")
	assert.True(t, cp.Waits[0].Person, "admin's wait is the longest, marked as a person's")

	for i, s := range cp.Steps {
		assert.NotEmpty(t, s.User, "step %d names its user", i)
		assert.Equal(t, query.ControllerName(s.User), s.Controller)
		if i == 0 {
			continue
		}
		prev := cp.Steps[i-1]
		assert.False(t, s.Time.Before(prev.Time), "step %d is not before its cause", i)
		assert.InDelta(t, max(s.Time.Sub(prev.End), 0).Seconds(), s.WaitSeconds, 1e-9, "step %d waits from its cause's end", i)
	}

	// The controllers' chain of the first rollout is on the path, step after step.
	chain := []struct{ controller, resource, verb, sub string }{
		{"deployment-controller", "replicasets", "create", ""},
		{"replicaset-controller", "pods", "create", ""},
		{"kube-scheduler", "pods", "create", "binding"},
		{"kwok-controller", "pods", "patch", "status"},
	}
	found := false
	for i := 0; i+len(chain) <= len(cp.Steps) && !found; i++ {
		ok := true
		for j, c := range chain {
			s := cp.Steps[i+j]
			ok = ok && s.Controller == c.controller && s.Object.Resource == c.resource && s.Verb == c.verb && s.Subresource == c.sub
		}
		if ok {
			found = true
			pod := cp.Steps[i+1].Object.Name
			assert.Equal(t, pod, cp.Steps[i+2].Object.Name, "the scheduler binds the Pod just created")
			assert.Equal(t, pod, cp.Steps[i+3].Object.Name, "kwok starts the Pod just bound")
			assert.Equal(t, "schedule", cp.Steps[i+2].Rule)
		}
	}
	assert.True(t, found, "the chain deployment -> replicaset -> pod -> binding -> status is on the path")

	// Where the time went: each controller's waits on the path add up.
	sum := map[string]float64{}
	for _, s := range cp.Steps {
		sum[s.Controller] += s.WaitSeconds
	}
	require.NotEmpty(t, cp.Waits)
	for i, w := range cp.Waits {
		assert.InDelta(t, sum[w.Controller], w.WaitSeconds, 1e-9, w.Controller)
		if i > 0 {
			assert.LessOrEqual(t, w.WaitSeconds, cp.Waits[i-1].WaitSeconds, "longest wait first")
		}
	}
}

// auditController names the controller behind each user of the recorded rollout, written out
// here rather than taken from query.ControllerName; a user not listed fails the test.
var auditController = map[string]string{
	"admin": "admin",
	"system:serviceaccount:kube-system:deployment-controller":     "deployment-controller",
	"system:serviceaccount:kube-system:replicaset-controller":     "replicaset-controller",
	"system:serviceaccount:kube-system:generic-garbage-collector": "generic-garbage-collector",
	"system:kube-scheduler": "kube-scheduler",
	"kwok-controller":       "kwok-controller",
}

// auditCause finds what write i of the audit log reacted to, by the documented table of
// default rules (docs/guides/critical-path.md) applied to the audit log itself: ownership
// from the response bodies' ownerReferences, spec changes from comparing the response bodies.
// It returns the cause's index (-1 for none) and the rule's name ("linked" for the fallback).
func auditCause(t *testing.T, writes []auditWrite, i int) (int, string) {
	t.Helper()
	w := writes[i]
	self := func(x auditWrite) bool { return x.resource == w.resource && x.name == w.name }
	parent := func(x auditWrite) bool { return w.owner != "" && x.resource == w.ownerResource && x.name == w.owner }
	child := func(x auditWrite) bool { return x.owner != "" && x.ownerResource == w.resource && x.owner == w.name }
	isCreateUpdatePatch := func(x auditWrite) bool { return x.verb == "create" || x.verb == "update" || x.verb == "patch" }
	latest := func(ok func(x auditWrite) bool) int {
		for j := i - 1; j >= 0; j-- {
			if ok(writes[j]) {
				return j
			}
		}
		return -1
	}
	c := auditController[w.user]
	require.NotEmpty(t, c, "controller of user %q", w.user)
	var rule string
	var ok func(x auditWrite) bool
	switch {
	case c == "deployment-controller" && w.resource == "replicasets":
		rule = "deployment-spec"
		ok = func(x auditWrite) bool { return parent(x) && isCreateUpdatePatch(x) && x.specChanged }
		if w.verb == "update" || w.verb == "patch" {
			// Or the latest status of a ReplicaSet of the same Deployment, its own included.
			sibling := func(x auditWrite) bool {
				return x.resource == "replicasets" && x.sub == "status" && (x.verb == "update" || x.verb == "patch") &&
					(self(x) || (w.owner != "" && x.owner == w.owner && x.ownerResource == w.ownerResource))
			}
			if js, jr := latest(sibling), latest(ok); js > jr {
				return js, "deployment-rollout"
			}
		}
	case c == "deployment-controller" && w.resource == "deployments" && w.sub == "status":
		rule = "deployment-status"
		ok = child
	case c == "replicaset-controller" && w.resource == "pods" && w.sub == "" && (w.verb == "create" || w.verb == "delete"):
		rule = "replicaset-spec"
		ok = func(x auditWrite) bool { return parent(x) && x.sub == "" && isCreateUpdatePatch(x) && x.specChanged }
	case c == "replicaset-controller" && w.resource == "replicasets" && w.sub == "status":
		rule = "replicaset-status"
		ok = child
	case c == "kube-scheduler" && w.resource == "pods" && w.sub == "binding":
		rule = "schedule"
		ok = func(x auditWrite) bool { return self(x) && x.sub == "" && x.verb == "create" }
	case c == "kwok-controller" && w.resource == "pods" && w.sub == "status":
		rule = "pod-start"
		ok = func(x auditWrite) bool { return self(x) && x.sub == "binding" && x.verb == "create" }
	case c == "kwok-controller" && w.resource == "pods" && w.sub == "" && w.verb == "delete":
		rule = "pod-terminate"
		ok = func(x auditWrite) bool { return self(x) && x.sub == "" && x.verb == "delete" }
	case c == "generic-garbage-collector" && w.verb == "delete":
		rule = "garbage-collect"
		ok = func(x auditWrite) bool { return parent(x) && x.verb == "delete" }
	}
	if ok != nil {
		if j := latest(ok); j >= 0 {
			return j, rule
		}
	}
	if j := latest(func(x auditWrite) bool { return self(x) || parent(x) || child(x) }); j >= 0 {
		return j, "linked"
	}
	return -1, ""
}

// TestControllerTimesMatchAuditLog: every controller's reaction times agree with the audit log.
// The expected numbers come from the audit log alone: its successful writes, each tied to its
// cause by the documented rules (auditCause), the wait from the cause's completion to the
// reaction's receipt, the act time from receipt to completion.
func TestControllerTimesMatchAuditLog(t *testing.T) {
	srv := newUIAPI(t, rollout(t), query.Config{})
	cp := criticalOf(t, srv.URL)
	writes := rolloutWrites(t)

	type want struct {
		users             map[string]bool
		writes, reactions int
		wait, maxWait     float64
		act, maxAct       float64
	}
	expect := map[string]*want{}
	rules := map[string]int{}
	for i, w := range writes {
		c := auditController[w.user]
		require.NotEmpty(t, c, "controller of user %q", w.user)
		e := expect[c]
		if e == nil {
			e = &want{users: map[string]bool{}}
			expect[c] = e
		}
		e.users[w.user] = true
		e.writes++
		act := w.completed.Sub(w.received).Seconds()
		e.act += act
		e.maxAct = max(e.maxAct, act)
		j, rule := auditCause(t, writes, i)
		if j < 0 {
			continue
		}
		rules[rule]++
		wait := max(w.received.Sub(writes[j].completed), 0).Seconds()
		e.reactions++
		e.wait += wait
		e.maxWait = max(e.maxWait, wait)
	}
	t.Logf("writes tied by rule, from the audit log: %v", rules)
	// The rollout has all of these controllers, and the rules tie most of their writes.
	for _, c := range []string{"admin", "deployment-controller", "replicaset-controller", "kube-scheduler", "kwok-controller", "generic-garbage-collector"} {
		require.Contains(t, expect, c)
	}
	for _, r := range []string{"deployment-spec", "deployment-rollout", "replicaset-spec", "schedule", "pod-start", "pod-terminate", "replicaset-status", "deployment-status", "garbage-collect"} {
		assert.Positive(t, rules[r], "rule %s ties some write of the audit log (%v)", r, rules)
	}

	got := map[string]query.ControllerTimes{}
	for _, c := range cp.Controllers {
		got[c.Controller] = c
	}
	assert.Len(t, got, len(expect), "the same controllers: %v", cp.Controllers)
	for c, e := range expect {
		g, ok := got[c]
		if !assert.True(t, ok, "%s in %+v", c, cp.Controllers) {
			continue
		}
		var users []string
		for u := range e.users {
			users = append(users, u)
		}
		slices.Sort(users)
		assert.Equal(t, users, g.Users, c)
		assert.Equal(t, e.writes, g.Writes, c)
		assert.Equal(t, e.reactions, g.Reactions, c)
		assert.InDelta(t, e.wait, g.WaitSeconds, 1e-6, c)
		assert.InDelta(t, e.maxWait, g.MaxWaitSeconds, 1e-6, c)
		if e.reactions > 0 {
			assert.InDelta(t, e.wait/float64(e.reactions), g.MeanWaitSeconds, 1e-6, c)
		}
		assert.InDelta(t, e.act, g.ActSeconds, 1e-6, c)
		assert.InDelta(t, e.maxAct, g.MaxActSeconds, 1e-6, c)
	}

	// The same numbers alone, for scripts.
	code, env := call(t, srv.URL+"/api/controller-times/"+cp.TraceID)
	require.Equal(t, http.StatusOK, code)
	var alone []query.ControllerTimes
	require.NoError(t, json.Unmarshal(env.Data, &alone))
	assert.Equal(t, cp.Controllers, alone)
}

// TestCriticalPathGolden keeps the rollout's critical path and controller times as JSON in
// testdata/golden/critical-rollout.json (go test ./internal/query -run TestCriticalPathGolden -update
// rewrites it): a change of the analysis shows as a diff.
func TestCriticalPathGolden(t *testing.T) {
	srv := newUIAPI(t, rollout(t), query.Config{})
	cp := criticalOf(t, srv.URL)
	code, env := call(t, srv.URL+"/api/controller-times/"+cp.TraceID)
	require.Equal(t, http.StatusOK, code)
	var times []query.ControllerTimes
	require.NoError(t, json.Unmarshal(env.Data, &times))
	out, err := json.MarshalIndent(struct {
		CriticalPath    query.CriticalPath      `json:"criticalPath"`
		ControllerTimes []query.ControllerTimes `json:"controllerTimes"`
	}{cp, times}, "", "  ")
	require.NoError(t, err)
	golden(t, "critical-rollout.json", string(out)+"\n")
}

// TestCriticalPathBadIDs: malformed IDs are refused, unknown ones are not found.
func TestCriticalPathBadIDs(t *testing.T) {
	srv := newUIAPI(t, rollout(t), query.Config{})
	code, _ := call(t, srv.URL+"/api/critical-path/not-hex")
	assert.Equal(t, http.StatusBadRequest, code)
	code, _ = call(t, srv.URL+"/api/critical-path/0123456789abcdef0123456789abcdef")
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = call(t, srv.URL+"/api/controller-times/0123456789abcdef0123456789abcdef")
	assert.Equal(t, http.StatusNotFound, code)
}

// TestControllerName shortens users to controller names.
func TestControllerName(t *testing.T) {
	for user, want := range map[string]string{
		"system:serviceaccount:kube-system:deployment-controller": "deployment-controller",
		"system:kube-scheduler":                                   "kube-scheduler",
		"system:node:kwok-node-1":                                 "kubelet",
		"admin":                                                   "admin",
		"system:":                                                 "system:",
		"system:serviceaccount:x":                                 "x",
	} {
		assert.Equal(t, want, query.ControllerName(user), user)
	}
}

// criticalAt fetches the critical path of any ID (a merge ID too).
func criticalAt(t *testing.T, srvURL, id string) query.CriticalPath {
	t.Helper()
	code, env := call(t, srvURL+"/api/critical-path/"+id)
	require.Equal(t, http.StatusOK, code, "%s: %+v", id, env.Errors)
	var cp query.CriticalPath
	require.NoError(t, json.Unmarshal(env.Data, &cp))
	return cp
}

// TestCriticalPathMerge: the critical path of a merge ID analyses the members as one graph. Two
// unrelated members (a Node and a Pod): the controllers' writes are those of both, and the path
// crosses from one to the other as "unexplained". A member that is part of another (a Pod of
// the Deployment's tree) changes nothing: writes are counted once. Bad merges are refused.
func TestCriticalPathMerge(t *testing.T) {
	srv := newUIAPI(t, rollout(t), query.Config{})
	one := func(tags map[string]string, service string) string {
		got := traces(t, searchURL(srv.URL, service, tags))
		require.Len(t, got, 1)
		return full32(got[0].TraceID)
	}
	node := one(map[string]string{"resource": "nodes", "name": "kwok-node-1"}, "tracing")
	pod := one(map[string]string{"resource": "pods", "name": "demo-7fb4c846ff-b7qjt"}, "tracing")
	dep := one(map[string]string{"resource": "deployments", "name": "demo"}, "tracing [full tree]")

	t.Run("unrelated", func(t *testing.T) {
		nodeCP, podCP := criticalAt(t, srv.URL, node), criticalAt(t, srv.URL, pod)
		cp := criticalAt(t, srv.URL, node+pod)
		assert.Equal(t, node+pod, cp.TraceID)
		writes := func(cps ...query.CriticalPath) map[string]int {
			out := map[string]int{}
			for _, c := range cps {
				for _, ct := range c.Controllers {
					out[ct.Controller] += ct.Writes
				}
			}
			return out
		}
		assert.Equal(t, writes(nodeCP, podCP), writes(cp), "every write of both members, once")
		// Nothing ties the Node's heartbeats to the Pod's writes: no chain of reactions runs
		// through the merge, so it has no critical path (none is invented from unexplained
		// gaps), and says why.
		assert.Empty(t, cp.Steps)
		assert.Contains(t, cp.NoPath, "no chain of reactions explains the time")
		assert.Empty(t, nodeCP.Steps, "a lone Node's heartbeats are no chain either")
		assert.NotEmpty(t, nodeCP.NoPath)
		assert.NotEmpty(t, podCP.Steps, "the Pod's own chain (create, binding, start) is a path")
		assert.Empty(t, podCP.NoPath)

		code, env := call(t, srv.URL+"/api/controller-times/"+node+pod)
		require.Equal(t, http.StatusOK, code)
		var alone []query.ControllerTimes
		require.NoError(t, json.Unmarshal(env.Data, &alone))
		assert.Equal(t, cp.Controllers, alone)
	})

	t.Run("overlapping", func(t *testing.T) {
		alone := criticalAt(t, srv.URL, dep)
		cp := criticalAt(t, srv.URL, dep+pod)
		assert.Equal(t, alone.Steps, cp.Steps)
		assert.Equal(t, alone.Controllers, cp.Controllers)
	})

	t.Run("refused", func(t *testing.T) {
		for _, tc := range []struct {
			id   string
			code int
			msg  string
		}{
			{node + node, http.StatusBadRequest, "given twice"},
			{node + pod[:16], http.StatusBadRequest, "a merge ID a multiple of 32"},
			{node + "0123456789abcdef0123456789abcdef", http.StatusNotFound, "member 0123456789abcdef0123456789abcdef"},
			{node + strings.Repeat("zz", 16), http.StatusBadRequest, "member 2"},
		} {
			expectError(t, srv.URL+"/api/critical-path/"+tc.id, tc.code, tc.msg)
		}
	})
}

package frontend_test

import (
	"bufio"
	"cmp"
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/frontend"
	"github.com/kelemetry/kelemetry/frontend/frontendtest"
)

// criticalOf searches the rollout's Deployment in full-tree mode and fetches the critical path
// of the trace ID the Jaeger API returned.
func criticalOf(t *testing.T, srvURL string) frontend.CriticalPath {
	t.Helper()
	got := traces(t, searchURL(srvURL, "tracing [full tree]", map[string]string{"resource": "deployments", "name": "demo"}))
	require.Len(t, got, 1)
	code, env := call(t, srvURL+"/api/critical-path/"+got[0].TraceID)
	require.Equal(t, http.StatusOK, code)
	var cp frontend.CriticalPath
	require.NoError(t, json.Unmarshal(env.Data, &cp))
	require.Equal(t, got[0].TraceID, cp.TraceID)
	return cp
}

// auditWrite is one successful write of the recorded rollout, read straight from the audit log.
type auditWrite struct {
	verb, user, resource, sub, name string
	received, completed             time.Time
}

// rolloutWrites reads the successful writes of the rollout's tree (Deployment demo, its
// ReplicaSets and Pods) from testdata/rollout/audit.jsonl, in the order they arrived.
func rolloutWrites(t *testing.T) []auditWrite {
	t.Helper()
	f, err := os.Open(frontendtest.RolloutAuditLog())
	require.NoError(t, err)
	defer f.Close()
	var out []auditWrite
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
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
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
		out = append(out, auditWrite{verb: ev.Verb, user: ev.User.Username, resource: r, sub: ev.ObjectRef.Subresource, name: name,
			received: ev.RequestReceivedTimestamp, completed: ev.StageTimestamp})
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, out)
	// A reaction's cause is the latest write that arrived before it.
	slices.SortStableFunc(out, func(a, b auditWrite) int {
		return cmp.Or(a.received.Compare(b.received), a.completed.Compare(b.completed))
	})
	return out
}

// TestCriticalPathRollout: the critical path of the recorded rollout runs from the Deployment's
// creation to the last write of its tree, names each step's user and controller, and follows the
// controllers' chain (ReplicaSet by the deployment controller, Pod by the ReplicaSet controller,
// binding by the scheduler, status by the kubelet's stand-in kwok).
func TestCriticalPathRollout(t *testing.T) {
	srv := newUIAPI(t, rollout(t), frontend.EngineConfig{})
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

	for i, s := range cp.Steps {
		assert.NotEmpty(t, s.User, "step %d names its user", i)
		assert.Equal(t, frontend.ControllerName(s.User), s.Controller)
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

// TestControllerTimesMatchAuditLog: the scheduler's and kwok's reaction times agree with the
// audit log: the scheduler waits from a Pod's creation to its binding, kwok from the binding to
// the status patch and from a graceful delete to the final delete.
func TestControllerTimesMatchAuditLog(t *testing.T) {
	srv := newUIAPI(t, rollout(t), frontend.EngineConfig{})
	cp := criticalOf(t, srv.URL)
	writes := rolloutWrites(t)

	type want struct {
		writes, reactions int
		wait, maxWait     float64
		act               float64
	}
	expect := map[string]*want{"kube-scheduler": {}, "kwok-controller": {}}
	// latest returns the latest write before index i that ok accepts.
	latest := func(i int, ok func(w auditWrite) bool) *auditWrite {
		for j := i - 1; j >= 0; j-- {
			if ok(writes[j]) {
				return &writes[j]
			}
		}
		return nil
	}
	for i, w := range writes {
		var c string
		switch w.user {
		case "system:kube-scheduler":
			c = "kube-scheduler"
		case "kwok-controller":
			c = "kwok-controller"
		default:
			continue
		}
		e := expect[c]
		e.writes++
		e.act += w.completed.Sub(w.received).Seconds()
		var cause *auditWrite
		switch {
		case w.sub == "binding":
			cause = latest(i, func(x auditWrite) bool { return x.name == w.name && x.verb == "create" && x.sub == "" })
		case w.sub == "status":
			cause = latest(i, func(x auditWrite) bool { return x.name == w.name && x.sub == "binding" })
		case w.verb == "delete":
			cause = latest(i, func(x auditWrite) bool { return x.name == w.name && x.verb == "delete" })
		}
		require.NotNil(t, cause, "cause of %+v", w)
		wait := max(w.received.Sub(cause.completed), 0).Seconds()
		e.reactions++
		e.wait += wait
		e.maxWait = max(e.maxWait, wait)
	}
	got := map[string]frontend.ControllerTimes{}
	for _, c := range cp.Controllers {
		got[c.Controller] = c
	}
	for c, e := range expect {
		g, ok := got[c]
		require.True(t, ok, "%s in %+v", c, cp.Controllers)
		assert.Positive(t, e.writes, c)
		assert.Equal(t, e.writes, g.Writes, c)
		assert.Equal(t, e.reactions, g.Reactions, c)
		assert.InDelta(t, e.wait, g.WaitSeconds, 1e-6, c)
		assert.InDelta(t, e.maxWait, g.MaxWaitSeconds, 1e-6, c)
		assert.InDelta(t, e.wait/float64(e.reactions), g.MeanWaitSeconds, 1e-6, c)
		assert.InDelta(t, e.act, g.ActSeconds, 1e-6, c)
	}

	// The same numbers alone, for scripts.
	code, env := call(t, srv.URL+"/api/controller-times/"+cp.TraceID)
	require.Equal(t, http.StatusOK, code)
	var alone []frontend.ControllerTimes
	require.NoError(t, json.Unmarshal(env.Data, &alone))
	assert.Equal(t, cp.Controllers, alone)
}

// TestCriticalPathBadIDs: malformed IDs are refused, unknown ones are not found.
func TestCriticalPathBadIDs(t *testing.T) {
	srv := newUIAPI(t, rollout(t), frontend.EngineConfig{})
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
		assert.Equal(t, want, frontend.ControllerName(user), user)
	}
}

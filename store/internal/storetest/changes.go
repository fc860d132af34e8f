package storetest

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/internal/audittest"
	"github.com/kelemetry/kelemetry/internal/changefeed"
)

// ChangeStore is a store with the change feed.
type ChangeStore interface {
	aggregator.Sink
	changefeed.Source
}

// expectedWrite is a write event of an audit log as the feed must list it.
type expectedWrite struct {
	auditID, resource, name, verb string
	failed                        bool
}

// auditWrites reads the write events of an audit log that the default audit consumer keeps:
// completed create, update, patch, delete and deletecollection requests naming an object,
// Events and Leases excluded.
func auditWrites(t *testing.T, path string) []expectedWrite {
	t.Helper()
	events, err := audittest.ReadFile(path)
	require.NoError(t, err)
	seen := map[string]bool{}
	var out []expectedWrite
	for _, ev := range events {
		if ev.ObjectRef == nil || ev.Stage != "ResponseComplete" || !changefeed.IsWriteVerb(ev.Verb) || seen[ev.AuditID] {
			continue
		}
		ref := auditv1.Ref(ev)
		if ref.Resource == "events" || ref.Resource == "leases" {
			continue
		}
		name := ref.Name
		if name == "" {
			if meta, ok := auditv1.ResponseIsObject(ref, ev); ok {
				name = meta.Name
			}
		}
		if name == "" {
			continue
		}
		seen[ev.AuditID] = true
		code := 0
		if ev.ResponseStatus != nil {
			code = int(ev.ResponseStatus.Code)
		}
		out = append(out, expectedWrite{auditID: ev.AuditID, resource: ref.Resource, name: name, verb: ev.Verb, failed: code >= 300})
	}
	return out
}

// all pages through every change q selects, pageSize at a time, checking the order.
func all(t *testing.T, st changefeed.Source, q changefeed.Query, pageSize int) []changefeed.Change {
	t.Helper()
	q.Limit = pageSize
	var out []changefeed.Change
	for range 10_000 {
		p, err := st.ChangeFeed().Find(context.Background(), q)
		require.NoError(t, err)
		require.LessOrEqual(t, len(p.Changes), pageSize)
		out = append(out, p.Changes...)
		if p.Next.IsZero() {
			break
		}
		q.Before = p.Next
	}
	for i := 1; i < len(out); i++ {
		require.False(t, out[i].Time.After(out[i-1].Time), "newest first: %v after %v", out[i].Time, out[i-1].Time)
	}
	return out
}

// RunChanges replays the recorded audit logs (testdata/<fixture>/audit.jsonl or .jsonl.gz, from
// the module root; root is the path to it) into a new store each and checks its change feed
// against the log: exactly the log's write events, newest first, through pages; and its filters.
func RunChanges(t *testing.T, root string, newStore func(t *testing.T) ChangeStore, fixtures ...string) {
	for _, fixture := range fixtures {
		t.Run(fixture, func(t *testing.T) {
			path := filepath.Join(root, "testdata", fixture, "audit.jsonl")
			if fixture == "bulk" {
				path += ".gz"
			}
			st := newStore(t)
			ctx := context.Background()
			p, err := audittest.Start(ctx, audittest.Config{Deps: aggregator.Deps{Sinks: []aggregator.Sink{st}}})
			require.NoError(t, err)
			_, err = p.HandleFile(ctx, path)
			require.NoError(t, err)
			require.NoError(t, p.Stop(ctx))
			if s, ok := st.(aggregator.Syncer); ok {
				require.NoError(t, s.Sync(ctx))
			}

			want := auditWrites(t, path)
			require.NotEmpty(t, want)
			got := all(t, st, changefeed.Query{}, 97)
			key := func(id, resource, name, verb string) string {
				return fmt.Sprint(id, " ", resource, " ", name, " ", verb)
			}
			var wantKeys, gotKeys []string
			failed := 0
			for _, w := range want {
				wantKeys = append(wantKeys, key(w.auditID, w.resource, w.name, w.verb))
				if w.failed {
					failed++
				}
			}
			for _, c := range got {
				// A subresource's write is on its parent object; its audit event names the parent.
				gotKeys = append(gotKeys, key(c.AuditID, c.Object.Resource, c.Object.Name, c.Verb))
			}
			slices.Sort(wantKeys)
			slices.Sort(gotKeys)
			require.Equal(t, wantKeys, gotKeys, "the feed holds exactly the log's write events")

			// Filters.
			deletes := all(t, st, changefeed.Query{Verbs: []string{"delete"}}, 1000)
			require.NotEmpty(t, deletes)
			for _, c := range deletes {
				assert.Equal(t, "delete", c.Verb)
			}
			fails := all(t, st, changefeed.Query{Outcome: changefeed.OutcomeFailed}, 1000)
			assert.Len(t, fails, failed)
			for _, c := range fails {
				assert.GreaterOrEqual(t, c.Code, 300)
			}
			persons := all(t, st, changefeed.Query{UserKinds: []string{changefeed.KindPerson}}, 1000)
			require.NotEmpty(t, persons)
			for _, c := range persons {
				assert.Equal(t, "admin", c.User, "the fixtures' person is admin with kubectl")
			}
			o := got[len(got)/2].Object
			same := all(t, st, changefeed.Query{Cluster: o.Cluster, Group: o.Group, Resource: o.Resource, Namespace: o.Namespace}, 1000)
			require.NotEmpty(t, same)
			var wantSame int
			for _, c := range got {
				if c.Object.Group == o.Group && c.Object.Resource == o.Resource && c.Object.Namespace == o.Namespace {
					wantSame++
				}
			}
			assert.Len(t, same, wantSame, "%s.%s in %q", o.Resource, o.Group, o.Namespace)
			byName := all(t, st, changefeed.Query{Resource: o.Resource, Name: o.Name, User: got[len(got)/2].User}, 1000)
			require.NotEmpty(t, byName)
			for _, c := range byName {
				assert.Equal(t, o.Name, c.Object.Name)
			}

			// A time range: the changes of the middle third, by time.
			first, last := got[len(got)-1].Time, got[0].Time
			from, to := first.Add(last.Sub(first)/3), first.Add(2*last.Sub(first)/3)
			var inRange int
			for _, c := range got {
				if !c.Time.Before(from) && c.Time.Before(to) {
					inRange++
				}
			}
			ranged := all(t, st, changefeed.Query{From: from, To: to}, 1000)
			assert.Len(t, ranged, inRange)
			for _, c := range ranged {
				assert.False(t, c.Time.Before(from) || !c.Time.Before(to), c.Time)
			}

			// The scan bound cuts a page and says where to go on.
			p1, err := st.ChangeFeed().Find(ctx, changefeed.Query{User: "nobody", MaxScan: 10})
			require.NoError(t, err)
			assert.True(t, p1.ScanCut)
			assert.Equal(t, 10, p1.Scanned)
			assert.False(t, p1.Next.IsZero())

			// The changed fields of a patch of the scale subresource.
			for _, c := range got {
				if c.Verb == "patch" && c.Subresource == "scale" && c.Code == 200 {
					assert.Equal(t, []string{"spec.replicas"}, c.Paths, c.Title)
					assert.Equal(t, changefeed.KindPerson, c.UserKind())
				}
			}
		})
	}
}

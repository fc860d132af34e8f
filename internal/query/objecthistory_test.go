package query_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type objectHistory struct {
	Data struct {
		Moments []struct {
			Time            time.Time `json:"time"`
			Event           string    `json:"event"`
			Snapshot        bool      `json:"snapshot"`
			Changes         int       `json:"changes"`
			Gap             bool      `json:"gap"`
			ResourceVersion string    `json:"resourceVersion"`
		} `json:"moments"`
		Truncated string `json:"truncated"`
	} `json:"data"`
}

// TestObjectHistorySecret lists the Secret's three writes: the creation's snapshot, an update
// with two changes, and an update whose diff could not be computed (a gap). Each moment's time,
// passed to /api/objects/at, shows the object after that write.
func TestObjectHistorySecret(t *testing.T) {
	_, srv := newAPI(t, secretStore(t))
	v := url.Values{"cluster": {"test"}, "resource": {"secrets"}, "namespace": {"default"}, "name": {"creds"}}
	var h objectHistory
	require.Equal(t, http.StatusOK, getJSON(t, srv.URL+"/api/objects/history?"+v.Encode(), &h))
	m := h.Data.Moments
	require.Len(t, m, 3)
	assert.Empty(t, h.Data.Truncated)
	for i, sec := range []int{0, 5, 10} {
		assert.True(t, m[i].Time.Equal(secretT0.Add(time.Duration(sec)*time.Second)), "moment %d at %s", i, m[i].Time)
		assert.Contains(t, m[i].Event, "alice")
	}
	assert.True(t, m[0].Snapshot)
	assert.Equal(t, "10", m[0].ResourceVersion)
	assert.False(t, m[1].Snapshot)
	assert.Equal(t, 2, m[1].Changes, "password replaced, token added")
	assert.False(t, m[1].Gap)
	assert.True(t, m[2].Gap, "the diff after the restart is missing")

	for i, want := range []string{"10", "11"} {
		var st objectState
		require.Equal(t, http.StatusOK, getJSON(t, secretAt(srv.URL, m[i].Time), &st))
		assert.Equal(t, want, st.Data.Source.ResourceVersion, "at moment %d", i)
	}

	// Bounds keep the moments inside them; the path form answers the same.
	v.Set("from", secretT0.Add(time.Second).Format(time.RFC3339Nano))
	v.Set("to", secretT0.Add(5*time.Second).Format(time.RFC3339Nano))
	var bounded objectHistory
	require.Equal(t, http.StatusOK, getJSON(t, srv.URL+"/api/objects/history?"+v.Encode(), &bounded))
	require.Len(t, bounded.Data.Moments, 1)
	assert.True(t, bounded.Data.Moments[0].Time.Equal(m[1].Time))
	var byPath objectHistory
	q := url.Values{"from": {v.Get("from")}, "to": {v.Get("to")}}
	require.Equal(t, http.StatusOK, getJSON(t, srv.URL+"/api/objects/test/-/secrets/default/creds/history?"+q.Encode(), &byPath))
	assert.Equal(t, bounded, byPath)

	// A write counts when its request overlaps the range: the update received at +5s-1ms and
	// stored at +5s is in a range that ends in between.
	v.Set("to", secretT0.Add(5*time.Second-time.Millisecond/2).Format(time.RFC3339Nano))
	var overlap objectHistory
	require.Equal(t, http.StatusOK, getJSON(t, srv.URL+"/api/objects/history?"+v.Encode(), &overlap))
	require.Len(t, overlap.Data.Moments, 1)
	assert.True(t, overlap.Data.Moments[0].Time.Equal(m[1].Time))
	v.Set("to", secretT0.Add(5*time.Second-2*time.Millisecond).Format(time.RFC3339Nano))
	require.Equal(t, http.StatusOK, getJSON(t, srv.URL+"/api/objects/history?"+v.Encode(), &overlap))
	assert.Empty(t, overlap.Data.Moments, "received after the range's end")
}

// TestObjectHistoryRollout: the Deployment's moments are in time order, and at each one that
// changed the object the reconstruction's last change is that moment.
func TestObjectHistoryRollout(t *testing.T) {
	_, srv := newAPI(t, rollout(t))
	v := url.Values{"cluster": {"test"}, "group": {"apps"}, "resource": {"deployments"}, "namespace": {"default"}, "name": {"demo"}}
	var h objectHistory
	require.Equal(t, http.StatusOK, getJSON(t, srv.URL+"/api/objects/history?"+v.Encode(), &h))
	m := h.Data.Moments
	require.Greater(t, len(m), 2)
	assert.True(t, m[0].Snapshot, "the history starts with the creation")
	changed := 0
	for i := range m {
		if i > 0 {
			assert.False(t, m[i].Time.Before(m[i-1].Time), "moment %d out of order", i)
		}
		if m[i].Changes == 0 || (i+1 < len(m) && m[i+1].Time.Equal(m[i].Time)) {
			continue
		}
		changed++
		var st struct {
			Data struct {
				Source struct {
					LastChange time.Time `json:"lastChange"`
				} `json:"source"`
			} `json:"data"`
		}
		require.Equal(t, http.StatusOK, getJSON(t, objectAtURL(srv.URL, "apps", "deployments", "default", "demo", m[i].Time), &st))
		assert.True(t, st.Data.Source.LastChange.Equal(m[i].Time), "moment %d (%s): last change %s", i, m[i].Event, st.Data.Source.LastChange)
	}
	assert.Positive(t, changed)
}

func TestObjectHistoryErrors(t *testing.T) {
	_, srv := newAPI(t, secretStore(t))
	base := "/api/objects/history?cluster=test&resource=secrets&namespace=default&name="
	for _, c := range []struct {
		path string
		code int
	}{
		{base, http.StatusBadRequest},
		{base + "creds&from=yesterday", http.StatusBadRequest},
		{base + "creds&from=2026-11-29T10:00:05Z&to=2026-11-29T10:00:00Z", http.StatusBadRequest},
		{base + "nope", http.StatusNotFound},
		{base + "creds&to=2020-01-01T00:00:00Z", http.StatusNotFound},
	} {
		code, body := fetch(t, srv.URL+c.path)
		assert.Equal(t, c.code, code, "%s: %s", c.path, body)
	}
}

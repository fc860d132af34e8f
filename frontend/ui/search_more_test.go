package ui_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/frontend"
	"github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/store/memory"
)

// ingestBulk replays the bulk fixture (20 Deployments of 50 Pods, their ReplicaSets, nodes).
func ingestBulk(t testing.TB) *memory.Store {
	t.Helper()
	return ingestFiles(t, filepath.Join("..", "..", "testdata", "bulk", "audit.jsonl.gz"), "")
}

// searchPage is the envelope of GET /api/ui/search.
type searchPage struct {
	Data    []query.SearchSummary `json:"data"`
	Limit   int                   `json:"limit"`
	More    bool                  `json:"more"`
	Unshown int                   `json:"unshown"`
}

// The search limit counts results, not found objects: on the bulk replay, where one Deployment
// and its Pods are dozens of objects, a search of every object with the UI's limit shows 20
// results and says that more exist (and how many found objects no result holds); a higher limit
// shows every Deployment and says nothing more exists. Results come newest first.
func TestSearchLimitCountsResults(t *testing.T) {
	srv := serve(t, ingestBulk(t), frontend.Config{})
	search := func(limit int) searchPage {
		t.Helper()
		q := url.Values{"service": {"tracing [full tree]"}, "start": {"0"}, "end": {strconv.FormatInt(time.Now().UnixMicro(), 10)}}
		if limit > 0 {
			q.Set("limit", strconv.Itoa(limit))
		}
		resp, err := http.Get(srv.URL + "/api/ui/search?" + q.Encode())
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var page searchPage
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&page))
		return page
	}
	deployments := func(p searchPage) int {
		n := 0
		for _, s := range p.Data {
			if s.Root.Resource == "deployments" {
				n++
			}
		}
		return n
	}

	def := search(20) // the UI's default
	assert.Len(t, def.Data, 20)
	assert.Equal(t, 20, def.Limit)
	assert.True(t, def.More)
	assert.Positive(t, def.Unshown)
	for i := 1; i < len(def.Data); i++ {
		assert.False(t, def.Data[i].End.After(def.Data[i-1].End), "newest first: %v after %v", def.Data[i].End, def.Data[i-1].End)
	}

	all := search(200)
	assert.False(t, all.More, "every result fits in 200")
	assert.Zero(t, all.Unshown)
	assert.Greater(t, len(all.Data), 20)
	assert.Equal(t, 20, deployments(all), "every Deployment of the bulk replay (bulk-01 to bulk-20)")
	assert.Less(t, deployments(def), 20, "the newest 20 results hold nodes too")
}

// On the bulk replay the search page says that more results exist than its 20, and its link
// shows them all.
func TestBrowserSearchMore(t *testing.T) {
	browser := newBrowser(t)
	srv := serve(t, ingestBulk(t), frontend.Config{})
	p := newPage(t, browser)
	p.open(srv.URL + "/search?range=custom&start=2026-11-29T17:00:00Z&end=2026-11-29T18:00:00Z")
	h := p.waitText(`.results h2`, "results")
	assert.Contains(t, h, "20 results (more exist)")
	msg := p.waitText(`.more-results`, "in no result shown")
	assert.Regexp(t, `The first 20 results are shown; \d+ more matching objects are in no result shown`, msg)
	p.click(`.more-results a`)
	p.waitJS("the longer list", `document.querySelector('.results h2') && document.querySelector('.results h2').innerText.startsWith('24 results')`)
	assert.Contains(t, p.location(), "limit=40")
	var more int
	p.eval(`document.querySelectorAll('.more-results').length`, &more)
	assert.Zero(t, more, "all results shown: nothing more to say")
}

// A search on event attributes shows, on each result, the events that matched (who, when, verb,
// outcome), newest first, and how many matched in all.
func TestSearchShowsMatchedEvents(t *testing.T) {
	srv := serve(t, ingestRollout(t), frontend.Config{})
	q := url.Values{"service": {"tracing [full tree]"}, "tags": {`{"verb":"delete"}`},
		"start": {strconv.FormatInt(rolloutFrom.UnixMicro(), 10)}, "end": {strconv.FormatInt(rolloutTo.UnixMicro(), 10)}}
	var sums []query.SearchSummary
	getJSON(t, srv.URL+"/api/ui/search?"+q.Encode(), &sums)
	require.NotEmpty(t, sums)
	var demo *query.SearchSummary
	for i := range sums {
		if sums[i].Root.Resource == "deployments" && sums[i].Root.Name == "demo" {
			demo = &sums[i]
		}
	}
	require.NotNil(t, demo, "the rollout's Deployment holds deletes")
	require.NotEmpty(t, demo.Matches)
	assert.LessOrEqual(t, len(demo.Matches), 5)
	assert.GreaterOrEqual(t, demo.MatchCount, len(demo.Matches))
	users := map[string]bool{}
	for i, m := range demo.Matches {
		assert.Equal(t, "delete", m.Verb)
		assert.NotEmpty(t, m.User)
		users[m.User] = true
		if i > 0 {
			assert.False(t, m.Time.After(demo.Matches[i-1].Time), "newest first")
		}
	}
	assert.NotEmpty(t, users)

	browser := newBrowser(t)
	p := newPage(t, browser)
	p.open(srv.URL + "/search?attrs=verb%3Ddelete&" + rolloutRange())
	p.waitJS("matched events", `document.querySelectorAll('.result .matches li').length > 0`)
	var rows []string
	p.eval(`[...document.querySelectorAll('.result .matches li:not(.note)')].map(li => li.innerText)`, &rows)
	require.NotEmpty(t, rows)
	for _, r := range rows {
		assert.Contains(t, r, "delete")
		assert.Regexp(t, `2026-11-29 17:\d\d:\d\d\.\d{3} UTC`, r)
	}
}

package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/e2e/scenario"
)

// kelemetrixConfigs are the all-in-one's --kelemetrix-config files: the default metrics and the
// e2e ones labelled by namespace.
var kelemetrixConfigs = []string{
	filepath.Join("..", "deploy", "kelemetrix.yaml"),
	filepath.Join("testdata", "kelemetrix.yaml"),
}

// controllerPrefix is the user name prefix of kube-controller-manager's controllers.
const controllerPrefix = "system:serviceaccount:kube-system:"

// requestKey is a series of e2e_kelemetrix_requests without its namespace.
type requestKey struct{ user, verb, resource, subresource string }

func (k requestKey) String() string {
	return k.user + " " + k.verb + " " + k.resource + "/" + k.subresource
}

// auditLogCounts counts the ResponseComplete events of namespace ns in kube-apiserver's audit log
// by user, verb, resource and subresource.
func auditLogCounts(path, ns string) (map[requestKey]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	counts := map[requestKey]int{}
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' { // a partial last line is written yet
			var ev struct {
				Stage string `json:"stage"`
				Verb  string `json:"verb"`
				User  struct {
					Username string `json:"username"`
				} `json:"user"`
				ObjectRef *struct {
					Resource    string `json:"resource"`
					Subresource string `json:"subresource"`
					Namespace   string `json:"namespace"`
				} `json:"objectRef"`
			}
			if jerr := json.Unmarshal(line, &ev); jerr != nil {
				return nil, fmt.Errorf("audit log: %w", jerr)
			}
			if ev.Stage == "ResponseComplete" && ev.ObjectRef != nil && ev.ObjectRef.Namespace == ns {
				counts[requestKey{ev.User.Username, ev.Verb, ev.ObjectRef.Resource, ev.ObjectRef.Subresource}]++
			}
		}
		if err == io.EOF {
			return counts, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

var (
	sampleLine = regexp.MustCompile(`(?m)^([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\} (\S+)$`)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// scrapeSeries returns the samples of family name on /metrics whose namespace label is ns, by
// requestKey.
func scrapeSeries(ctx context.Context, name, ns string) (map[requestKey]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, env.Kelemetry.URL+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[requestKey]float64{}
	for _, m := range sampleLine.FindAllStringSubmatch(string(body), -1) {
		if m[1] != name {
			continue
		}
		labels := map[string]string{}
		for _, l := range labelPair.FindAllStringSubmatch(m[2], -1) {
			labels[l[1]] = l[2]
		}
		if labels["namespace"] != ns {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m[0], err)
		}
		out[requestKey{labels["user"], labels["verb"], labels["resource"], labels["subresource"]}] += v
	}
	return out, nil
}

// differences lists the keys whose counts differ.
func differences(want map[requestKey]int, got map[requestKey]float64) []string {
	var diffs []string
	for k, w := range want {
		if got[k] != float64(w) {
			diffs = append(diffs, fmt.Sprintf("%s: audit log %d, /metrics %v", k, w, got[k]))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: audit log 0, /metrics %v", k, g))
		}
	}
	sort.Strings(diffs)
	return diffs
}

// TestKelemetrixRollout: after the rollout scenario, the all-in-one's /metrics (fed by
// kube-apiserver's audit webhook) shows exactly the create and update counts by controller user
// that kube-apiserver's own audit log holds for the namespace, every request of the namespace
// once, and each latency histogram counts as many requests as the request counter.
func TestKelemetrixRollout(t *testing.T) {
	needEnv(t)
	start := time.Now()
	ns := newNamespace(t, "kelemetrix")
	if _, err := scenario.Rollout(t.Context(), session(t, ns)); err != nil {
		t.Fatal(err)
	}
	clusterDone := time.Since(start)

	var want map[requestKey]int
	var got map[requestKey]float64
	// The webhook batches up to a second behind the log; settle when both agree.
	eventually(t, kelemetryTimeout, "e2e_kelemetrix_requests of the namespace equal the audit log's counts", func(ctx context.Context) error {
		var err error
		if want, err = auditLogCounts(env.Cluster.AuditLog, ns); err != nil {
			return err
		}
		if got, err = scrapeSeries(ctx, "e2e_kelemetrix_requests_total", ns); err != nil {
			return err
		}
		if d := differences(want, got); len(d) > 0 {
			return fmt.Errorf("%d series differ: %s", len(d), strings.Join(d, "; "))
		}
		return nil
	})

	// The controllers' creates and updates, the question: who writes how often.
	writes := map[requestKey]int{}
	for k, n := range want {
		if strings.HasPrefix(k.user, controllerPrefix) && (k.verb == "create" || k.verb == "update") {
			writes[k] = n
		}
	}
	for _, k := range []requestKey{
		{deploymentController, "create", "replicasets", ""},
		{controllerPrefix + "replicaset-controller", "create", "pods", ""},
		{deploymentController, "update", "deployments", "status"},
	} {
		if writes[k] == 0 {
			t.Errorf("the audit log has no %s in the namespace: the scenario did not run as expected (writes: %v)", k, writes)
		}
	}
	for k, n := range writes {
		if got[k] != float64(n) {
			t.Errorf("%s: /metrics %v, audit log %d", k, got[k], n)
		}
		t.Logf("%s: %d", k, n)
	}

	// Histogram counts equal request counts, series by series.
	eventually(t, kelemetryTimeout, "e2e_kelemetrix_latency_seconds_count equals e2e_kelemetrix_requests_total", func(ctx context.Context) error {
		counts, err := scrapeSeries(ctx, "e2e_kelemetrix_latency_seconds_count", ns)
		if err != nil {
			return err
		}
		if d := differences(want, counts); len(d) > 0 {
			return fmt.Errorf("%d series differ: %s", len(d), strings.Join(d, "; "))
		}
		return nil
	})

	// The default metrics are served too: the rollout's controllers in the request counter.
	eventually(t, kelemetryTimeout, "kelemetrix_requests_total shows the deployment controller", func(ctx context.Context) error {
		all, err := scrapeSeries(ctx, "kelemetrix_requests_total", "")
		if err != nil {
			return err
		}
		for k := range all {
			if k.user == deploymentController && k.verb == "update" && k.resource == "replicasets" {
				return nil
			}
		}
		return fmt.Errorf("no update of replicasets by %s among %d series", deploymentController, len(all))
	})
	logTimings(t, start, "cluster steps", clusterDone.Round(time.Millisecond), "metrics checks", (time.Since(start) - clusterDone).Round(time.Millisecond),
		"series", len(want))
}

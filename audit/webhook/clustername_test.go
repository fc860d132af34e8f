package webhook

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kelemetry/kelemetry/internal/aggregatortest"
)

// The webhook path and the webhook's default cluster accept and reject cluster names as aggregator.ValidateClusterName does.
func TestClusterNameRule(t *testing.T) {
	for _, tc := range aggregatortest.ClusterNames {
		t.Run(tc.Name, func(t *testing.T) {
			wt := newWebhookTest(t, Config{})
			rec := wt.post("/audit/"+strings.ReplaceAll(strings.ReplaceAll(tc.Name, "/", "%2F"), " ", "%20"), strings.NewReader(testBatch), nil)
			assert.Equal(t, tc.Valid, rec.Code == http.StatusOK, "webhook path: %d %s", rec.Code, rec.Body.String())

			err := Config{DefaultCluster: tc.Name}.Validate()
			assert.Equal(t, tc.Valid, err == nil, "webhook defaultCluster: %v", err)
		})
	}
}

package audit

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kelemetry/kelemetry/audit/auditlog"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
)

// The cluster of replayed and followed logs accepts and rejects cluster names as
// aggregator.ValidateClusterName does (webhook.TestClusterNameRule covers the webhook's).
func TestClusterNameRule(t *testing.T) {
	for _, tc := range aggregatortest.ClusterNames {
		t.Run(tc.Name, func(t *testing.T) {
			err := Config{Cluster: tc.Name}.Validate()
			assert.Equal(t, tc.Valid, err == nil, "audit cluster (replay, follow): %v", err)
			err = auditlog.FollowConfig{Path: "audit.log", Cluster: tc.Name}.Validate()
			assert.Equal(t, tc.Valid, err == nil, "follow cluster: %v", err)
		})
	}
}

package event

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kelemetry/kelemetry/internal/aggregatortest"
)

// The Event sources accept and reject cluster names, of the main cluster and of WatchClusters,
// as aggregator.ValidateClusterName does.
func TestClusterNameRule(t *testing.T) {
	for _, tc := range aggregatortest.ClusterNames {
		t.Run(tc.Name, func(t *testing.T) {
			err := Config{Cluster: tc.Name}.Validate()
			assert.Equal(t, tc.Valid, err == nil, "cluster: %v", err)
			err = Config{Cluster: "main", Watch: true, WatchClusters: []string{tc.Name}}.Validate()
			assert.Equal(t, tc.Valid, err == nil, "watchClusters: %v", err)
		})
	}
}

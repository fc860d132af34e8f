package aggregator_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
)

func TestValidateClusterName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"prod-1", true},
		{"default", true},
		{"eu.west_2", true},
		{"a", true},
		{strings.Repeat("a", 63), true},
		{"", false},
		{"Prod", false},
		{"a/b", false},
		{"a b", false},
		{"-a", false},
		{"a-", false},
		{"_a", false},
		{"ünicode", false},
		{strings.Repeat("a", 64), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := aggregator.ValidateClusterName(tc.name)
			if tc.ok {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, aggregator.ErrInvalidClusterName)
		})
	}
}

// The shared cases agree with ValidateClusterName.
func TestClusterNamesCases(t *testing.T) {
	for _, tc := range aggregatortest.ClusterNames {
		assert.Equal(t, tc.Valid, aggregator.ValidateClusterName(tc.Name) == nil, tc.Name)
	}
}

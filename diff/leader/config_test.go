package leader

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLeaderElectionConfig(t *testing.T) {
	c := Config{}.WithDefaults()
	assert.Equal(t, DefaultLeaseName, c.LeaseName)
	assert.Equal(t, defaultLeaseNamespace, c.LeaseNamespace)
	assert.NotEmpty(t, c.Identity)
	assert.Equal(t, defaultLeaseDuration, c.LeaseDuration)
	require.NoError(t, Config{Enabled: true}.Validate())
	require.NoError(t, Config{RenewDeadline: time.Hour}.Validate(), "off: not checked")
	require.Error(t, Config{Enabled: true, LeaseDuration: time.Second, RenewDeadline: 2 * time.Second}.Validate())
	require.Error(t, Config{Enabled: true, RenewDeadline: time.Second, RetryPeriod: time.Second}.Validate())
	require.Error(t, Config{Enabled: true, RetryPeriod: -time.Second}.Validate())
	require.Error(t, Config{Enabled: true, LeaseDuration: 900 * time.Millisecond, RenewDeadline: 500 * time.Millisecond}.Validate(), "whole seconds")
}

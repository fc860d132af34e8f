package leader

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	leadercfg "github.com/kelemetry/kelemetry/diff/leader"
	"github.com/kelemetry/kelemetry/internal/leasefake"
	"github.com/kelemetry/kelemetry/telemetry"
)

func fastElection(identity string) leadercfg.Config {
	return leadercfg.Config{Enabled: true, Identity: identity, LeaseNamespace: "kelemetry",
		LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 100 * time.Millisecond}
}

func TestNewNeedsAClient(t *testing.T) {
	_, err := New(leadercfg.Config{}, nil, telemetry.Settings{})
	require.Error(t, err)
}

// Two replicas: exactly one leads at a time; when the leader stops it releases the Lease and
// the other takes over well before the lease duration runs out.
func TestElectorOneLeaderAndFailover(t *testing.T) {
	srv, dyn := leasefake.NewServer(t)
	a, err := New(fastElection("a"), dyn, telemetry.Settings{})
	require.NoError(t, err)
	b, err := New(fastElection("b"), dyn, telemetry.Settings{})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, a.Start(ctx))
	t.Cleanup(func() { _ = a.Stop(ctx) })
	require.Error(t, a.Start(ctx), "start twice")
	require.Eventually(t, a.Leading, 5*time.Second, 5*time.Millisecond, "the first replica leads")
	require.NoError(t, b.Start(ctx))
	t.Cleanup(func() { _ = b.Stop(ctx) })
	key := "kelemetry/" + leadercfg.DefaultLeaseName
	assert.Equal(t, "a", srv.Holder(key))

	// For several renewals: a keeps the Lease, b never leads. The lease is long compared to the
	// retry period so that a starved CPU (CI runs packages in parallel) cannot expire it.
	require.Never(t, func() bool { return !a.Leading() || b.Leading() }, 1500*time.Millisecond, 10*time.Millisecond,
		"the leader lost the Lease while renewing it, or two led at once")
	assert.False(t, b.Leading())

	stopped := time.Now()
	require.NoError(t, a.Stop(ctx))
	assert.False(t, a.Leading(), "a stopped replica does not lead")
	require.Eventually(t, b.Leading, 5*time.Second, 5*time.Millisecond, "the other replica takes over")
	assert.Equal(t, "b", srv.Holder(key))
	assert.Less(t, time.Since(stopped), 3*time.Second, "released, not expired (the lease runs 4s)")
	require.NoError(t, a.Stop(ctx), "stop twice")
}

package natslog

import (
	"context"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/natsqueue"
)

// testConfig is a small, fast configuration for tests.
func testConfig(urls ...string) natsqueue.Config {
	return natsqueue.Config{
		URLs:            urls,
		Partitions:      4,
		AckWait:         2 * time.Second,
		PinnedTTL:       2 * time.Second,
		RetryBackoff:    20 * time.Millisecond,
		MaxRetryBackoff: 100 * time.Millisecond,
		MaxDeliveries:   3,
		MaxInFlight:     8,
		PublishTimeout:  2 * time.Second,
		ConnectTimeout:  time.Second,
		ReconnectWait:   50 * time.Millisecond,
	}
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

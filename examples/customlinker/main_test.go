package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/goleak"

	"github.com/kelemetry/kelemetry"
	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
)

// TestMain fails the package's tests when a goroutine outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestValidateApp(t *testing.T) {
	require.NoError(t, fx.ValidateApp(options(kelemetry.Config{}, slog.Default())))
}

func TestServiceAccountLinkerIsCollectedByTheAggregator(t *testing.T) {
	var linkers struct {
		fx.In
		All []aggregator.Linker `group:"kelemetry.linkers"`
	}
	app := fx.New(options(kelemetry.Config{AuditAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0"}, slog.Default()), fx.Populate(&linkers))
	require.NoError(t, app.Err())
	var names []string
	for _, l := range linkers.All {
		names = append(names, l.Name())
	}
	assert.Contains(t, names, "serviceaccount")
	assert.Contains(t, names, "owner", "built-in linkers stay")
}

func TestServiceAccountLinker(t *testing.T) {
	pod := aggregator.ObjectRef{Cluster: "c", Version: "v1", Resource: "pods", Namespace: "default", Name: "p"}
	l := NewServiceAccountLinker()
	ctx := context.Background()

	links, err := l.Lookup(ctx, aggregator.Object{ObjectRef: pod, Body: []byte(`{"spec":{"serviceAccountName":"builder"}}`)})
	require.NoError(t, err)
	require.Len(t, links, 1)
	assert.Equal(t, aggregator.ObjectRef{Cluster: "c", Version: "v1", Resource: "serviceaccounts", Namespace: "default", Name: "builder"}, links[0].Target)
	assert.Equal(t, aggregator.RoleParent, links[0].Role)

	for _, body := range [][]byte{[]byte(`{"spec":{}}`), nil} {
		links, err = l.Lookup(ctx, aggregator.Object{ObjectRef: pod, Body: body})
		require.NoError(t, err)
		assert.Empty(t, links)
	}
	_, err = l.Lookup(ctx, aggregator.Object{ObjectRef: pod, Body: []byte(`{"spec":`)})
	assert.Error(t, err)

	// Through the aggregator: the ServiceAccount's trace lists the Pod as a child.
	sink := &aggregatortest.RecordingSink{}
	e, err := aggregator.New(aggregator.Config{}, aggregator.Deps{Sinks: []aggregator.Sink{sink}, Linkers: []aggregator.Linker{l}})
	require.NoError(t, err)
	require.NoError(t, e.Start(ctx))
	ev := &aggregator.Event{Object: aggregator.Object{ObjectRef: pod, Body: []byte(`{"spec":{"serviceAccountName":"builder"}}`)}, Source: "audit", ID: "1", Title: "admin create"}
	ev.Start = mustTime(t, "2026-11-29T17:00:01Z")
	require.NoError(t, e.Send(ctx, ev))
	require.NoError(t, e.Stop(ctx))
	assert.Equal(t, "serviceaccounts/builder ns=default\n  pods/p ns=default (pods)\n    - audit: admin create\n", aggregatortest.RenderTrees(sink.Spans()))
}

func mustTime(t *testing.T, s string) (out time.Time) {
	t.Helper()
	out, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return out
}

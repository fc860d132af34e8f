// Package auditfixture gives tests of the audit pipeline its recorded events: the decoded audit
// events of the scenarios under the repository's testdata folder.
package auditfixture

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/internal/fixture"
)

// Events decodes the events of testdata/<scenario>/audit.jsonl (or its .gz).
func Events(tb testing.TB, scenario string) []*auditv1.Event {
	tb.Helper()
	var events []*auditv1.Event
	for _, line := range fixture.Lines(tb, scenario, "audit.jsonl") {
		ev, err := auditv1.DecodeEvent(line)
		require.NoError(tb, err)
		events = append(events, ev)
	}
	return events
}

// Package auditfixture gives tests of the audit pipeline its recorded events: the decoded audit
// events of the scenarios under the repository's testdata folder.
package auditfixture

import (
	"testing"
	"time"

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

// MetadataEvent is a Metadata-level audit event (no bodies) of verb on deployment default/name,
// completed at end.
func MetadataEvent(id, verb, name, rv string, end time.Time) *auditv1.Event {
	return &auditv1.Event{
		AuditID: id, Stage: "ResponseComplete", Verb: verb, Level: "Metadata",
		User: auditv1.UserInfo{Username: "alice"},
		ObjectRef: &auditv1.ObjectReference{Resource: "deployments", Namespace: "default", Name: name,
			APIGroup: "apps", APIVersion: "v1", ResourceVersion: rv},
		ResponseStatus:           &auditv1.Status{Code: 200},
		RequestReceivedTimestamp: end.Add(-10 * time.Millisecond),
		StageTimestamp:           end,
	}
}

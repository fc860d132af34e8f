package auditv1

import (
	"encoding/json"
	"syscall"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/kelemetry/kelemetry/internal/fixture"
	"github.com/stretchr/testify/require"
	k8saudit "k8s.io/apiserver/pkg/apis/audit/v1"
)

// Run with: go test ./audit -run '^$' -bench 'Decode' -benchmem -cpu 1
//
// Every benchmark decodes all webhook batches (or log lines) of the recorded bulk scenario per
// iteration, reports its input bytes (MB/s) and events/s.

// plainEventList is an EventList of light events, for the generic decoders.
type plainEventList struct {
	Kind       string   `json:"kind"`
	APIVersion string   `json:"apiVersion"`
	Items      []*Event `json:"items"`
}

func benchDecode(b *testing.B, lines [][]byte, decode func([]byte) (int, error)) {
	var size int64
	events := 0
	for _, line := range lines {
		size += int64(len(line))
		n, err := decode(line)
		require.NoError(b, err)
		events += n
	}
	b.SetBytes(size)
	b.ReportAllocs()
	cpu0 := processCPUTime(b)
	b.ResetTimer()
	for b.Loop() {
		for _, line := range lines {
			if _, err := decode(line); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	// On a shared machine wall time varies with the neighbours' load; CPU time (this process's,
	// garbage collection included) varies much less.
	b.ReportMetric(float64(events)*float64(b.N)/(processCPUTime(b)-cpu0).Seconds(), "events/cpu-s")
}

// processCPUTime is the user and system CPU time used by this process so far.
func processCPUTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func bulkBatches(b *testing.B) [][]byte { return fixture.Lines(b, "bulk", "webhook-batches.jsonl") }

func bulkLog(b *testing.B) [][]byte { return fixture.Lines(b, "bulk", "audit.jsonl") }

// BenchmarkDecodeEventList is DecodeEventList: a hand-written decoder on jsontext.
func BenchmarkDecodeEventList(b *testing.B) {
	benchDecode(b, bulkBatches(b), func(data []byte) (int, error) {
		events, err := DecodeEventList(data)
		return len(events), err
	})
}

// BenchmarkDecodeEventListStdlibAuditV1 is the baseline: encoding/json into the full audit type.
func BenchmarkDecodeEventListStdlibAuditV1(b *testing.B) {
	benchDecode(b, bulkBatches(b), func(data []byte) (int, error) {
		var list k8saudit.EventList
		err := json.Unmarshal(data, &list)
		return len(list.Items), err
	})
}

// BenchmarkDecodeEventListStdlibEvent is encoding/json into the light Event.
func BenchmarkDecodeEventListStdlibEvent(b *testing.B) {
	benchDecode(b, bulkBatches(b), func(data []byte) (int, error) {
		var list plainEventList
		err := json.Unmarshal(data, &list)
		return len(list.Items), err
	})
}

// BenchmarkDecodeEventListJSONv2Event is github.com/go-json-experiment/json into the light Event.
func BenchmarkDecodeEventListJSONv2Event(b *testing.B) {
	benchDecode(b, bulkBatches(b), func(data []byte) (int, error) {
		var list plainEventList
		err := jsonv2.Unmarshal(data, &list, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
		return len(list.Items), err
	})
}

// BenchmarkDecodeEventListJSONv2AuditV1 is github.com/go-json-experiment/json into the full type.
func BenchmarkDecodeEventListJSONv2AuditV1(b *testing.B) {
	benchDecode(b, bulkBatches(b), func(data []byte) (int, error) {
		var list k8saudit.EventList
		err := jsonv2.Unmarshal(data, &list, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
		return len(list.Items), err
	})
}

// BenchmarkDecodeEvent is DecodeEvent over the lines of the bulk audit log.
func BenchmarkDecodeEvent(b *testing.B) {
	benchDecode(b, bulkLog(b), func(data []byte) (int, error) {
		_, err := DecodeEvent(data)
		return 1, err
	})
}

// BenchmarkDecodeEventStdlibAuditV1 is the baseline for log lines.
func BenchmarkDecodeEventStdlibAuditV1(b *testing.B) {
	benchDecode(b, bulkLog(b), func(data []byte) (int, error) {
		var ev k8saudit.Event
		err := json.Unmarshal(data, &ev)
		return 1, err
	})
}

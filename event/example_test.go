package event_test

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/kelemetry/kelemetry/event"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/telemetry"
)

func ExampleReplayFile() {
	agg := &aggregatortest.RecordingAggregator{}
	conv := event.NewConverter("kind", nil, 0)
	st, err := event.ReplayFile(context.Background(), filepath.Join("..", "testdata", "cronjob", "events-core-v1.json"), conv, agg, telemetry.Settings{})
	if err != nil {
		panic(err)
	}
	fmt.Println(st.Events, "events,", st.Sent, "sent")
	for _, ev := range agg.Events() {
		count, _ := ev.Attributes.Get(event.AttrCount)
		fmt.Printf("%s/%s: %s x%s\n", ev.Object.Resource, ev.Object.Name, ev.Title, count)
	}
	// Output:
	// 4 events, 4 sent
	// pods/nightly-manual-b2fvw: Scheduled x1
	// jobs/nightly-manual: SuccessfulCreate x1
	// jobs/nightly-manual: Completed x1
	// cronjobs/nightly: UnexpectedJob x3
}

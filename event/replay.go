package event

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/internal/replay"
	"github.com/kelemetry/kelemetry/telemetry"
)

// ReplayStats counts what a replay did with one file.
type ReplayStats struct {
	File string `json:"file"`
	// Events read, Sent to the aggregator, Skipped (no object, no timestamp, unmappable kind),
	// Failed (the aggregator refused them).
	Events  int `json:"events"`
	Sent    int `json:"sent"`
	Skipped int `json:"skipped"`
	Failed  int `json:"failed"`
	// Dropped counts Events whose timestamps are outside the representable range or too far in
	// the future (see Converter.Convert); they are logged (rate-limited) with the field.
	Dropped int `json:"dropped,omitempty"`
}

// maxReplayFile bounds the size of a replayed file.
const maxReplayFile = 1 << 30

// ReplayFile sends the Events recorded in path to agg: an EventList (or any List, core/v1 or
// events.k8s.io/v1 items, as `kubectl get events -o json` writes), a single Event, or one Event
// per line. Per-event problems are counted, not returned (and logged at debug through ts); the
// error is for the file itself.
func ReplayFile(ctx context.Context, path string, conv *Converter, agg aggregator.Aggregator, ts telemetry.Settings) (ReplayStats, error) {
	st := ReplayStats{File: path}
	logger := ts.Log().With("component", "event.replay")
	drops := newTimeDrops(instrument.NewMeter(ts, meterScope), logger.With("file", path))
	f, err := os.Open(path)
	if err != nil {
		return st, fmt.Errorf("replay events: %w", err)
	}
	defer f.Close()
	items, err := readItems(io.LimitReader(f, maxReplayFile))
	if err != nil {
		return st, fmt.Errorf("replay events %s: %w", path, err)
	}
	for _, raw := range items {
		if err := ctx.Err(); err != nil {
			return st, fmt.Errorf("replay events %s: %w", path, err)
		}
		st.Events++
		rec, err := decode(raw)
		if err != nil {
			st.Skipped++
			logger.Debug("skip event", "file", path, "error", err)
			continue
		}
		ev, err := conv.Convert(ctx, rec, time.Time{})
		if err != nil && drops.drop(ctx, err) != "" {
			st.Dropped++
			continue
		}
		if err != nil {
			st.Skipped++
			logger.Debug("skip event", "file", path, "event", rec.Namespace+"/"+rec.Name, "error", err)
			continue
		}
		if err := sendWaiting(ctx, agg, ev); err != nil {
			st.Failed++
			logger.Debug("send event", "file", path, "event", rec.Namespace+"/"+rec.Name, "error", err)
			continue
		}
		st.Sent++
	}
	return st, nil
}

// readItems splits a list, a single object or JSON lines into raw Events.
func readItems(r io.Reader) ([]json.RawMessage, error) {
	br := bufio.NewReader(r)
	dec := json.NewDecoder(br)
	var items []json.RawMessage
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return items, nil
		}
		if err != nil {
			return items, err
		}
		var head struct {
			Kind  string            `json:"kind"`
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			return items, err
		}
		if head.Items != nil || isList(head.Kind) {
			items = append(items, head.Items...)
			continue
		}
		if len(bytes.TrimSpace(raw)) > 0 {
			items = append(items, raw)
		}
	}
}

// Replayer replays files of recorded Events once, in the background (the all-in-one's
// --replay-events).
type Replayer = replay.Runner[ReplayStats]

// newReplayer returns a Replayer of files; ts gives its logger (may be unset).
func newReplayer(files []string, conv *Converter, agg aggregator.Aggregator, ts telemetry.Settings) *Replayer {
	return replay.New("event replay", files, func(ctx context.Context, file string, _ *replay.Tracker[ReplayStats]) (ReplayStats, error) {
		return ReplayFile(ctx, file, conv, agg, ts)
	}, ts.Log())
}

// sendWaiting sends ev, waiting out a sink outage (errors wrapping aggregator.ErrSinkUnavailable:
// a full disk, a full OTLP queue) with backoff until ctx ends, as a replay must not lose what
// it read; other errors return at once.
func sendWaiting(ctx context.Context, agg aggregator.Aggregator, ev *aggregator.Event) error {
	for attempt := 0; ; attempt++ {
		err := agg.Send(ctx, ev)
		if err == nil || !errors.Is(err, aggregator.ErrSinkUnavailable) || !outageBackoff.Sleep(ctx, attempt) {
			return err
		}
	}
}

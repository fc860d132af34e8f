package remotelinker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/telemetry"
)

// errNoWorker is wrapped by Lookup's error when no worker listens on the linker's subject.
var errNoWorker = errors.New("remotelinker: no worker")

// errTimeout is wrapped by Lookup's error when no reply came within the timeout.
var errTimeout = errors.New("remotelinker: timeout")

// errBusy is returned by Lookup when MaxInFlight requests already wait for their reply: the job
// is skipped (the object's next event retries it).
var errBusy = errors.New("remotelinker: too many requests in flight")

// errNotConnected is wrapped by Lookup's error when the client has no connection (yet).
var errNotConnected = errors.New("remotelinker: not connected to NATS")

// Results of the kelemetry.remotelinker.jobs counter.
const (
	resultOK           = "ok"
	resultTimeout      = "timeout"
	resultNoResponders = "no_responders"
	resultSkipped      = "skipped"
	resultBadReply     = "bad_reply"
	resultRemoteError  = "remote_error"
	resultError        = "error"
)

// Client is an aggregator.Linker served by remote workers: Lookup sends the object as a job to
// the linker's subject and returns the links of the reply. It implements
// aggregator.IsolatedLinker, so the aggregator gives it MaxInFlight link workers of its own. It
// is safe for concurrent use.
type Client struct {
	cfg    LinkerConfig
	conn   func() *nats.Conn
	sem    chan struct{}
	logger *slog.Logger
	m      clientMetrics
	attrs  metric.MeasurementOption
}

type clientMetrics struct {
	jobs     metric.Int64Counter
	links    metric.Int64Counter
	bytes    metric.Int64Counter
	duration metric.Float64Histogram
	// bodiesDropped counts jobs sent without the object's body, which was over the servers'
	// maximum payload.
	bodiesDropped metric.Int64Counter
}

// NewClient builds the client of one remote linker on nc (which the caller closes).
func NewClient(nc *nats.Conn, cfg LinkerConfig, tel telemetry.Settings) (*Client, error) {
	if nc == nil {
		return nil, errors.New("remotelinker: nil NATS connection")
	}
	return newClient(func() *nats.Conn { return nc }, cfg, tel)
}

// newClient builds a client whose connection comes from conn at each Lookup (nil: not
// connected yet), for Module, which connects at start.
func newClient(conn func() *nats.Conn, cfg LinkerConfig, tel telemetry.Settings) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("remotelinker: %w", err)
	}
	cfg = cfg.WithDefaults()
	c := &Client{
		cfg:    cfg,
		conn:   conn,
		sem:    make(chan struct{}, cfg.MaxInFlight),
		logger: tel.Log().With("component", "remotelinker", "linker", cfg.Name),
		attrs:  metric.WithAttributes(attribute.String("linker", cfg.Name)),
	}
	m := instrument.NewMeter(tel, "github.com/kelemetry/kelemetry/remotelinker")
	// The linker's name is known here: its series are at 0 from the start, each result and
	// direction included.
	linker := attribute.String("linker", cfg.Name)
	var jobSets, byteSets []attribute.Set
	for _, r := range []string{resultOK, resultTimeout, resultNoResponders, resultSkipped, resultBadReply, resultRemoteError, resultError} {
		jobSets = append(jobSets, attribute.NewSet(linker, attribute.String("result", r)))
	}
	for _, d := range []string{"sent", "received"} {
		byteSets = append(byteSets, attribute.NewSet(linker, attribute.String("direction", d)))
	}
	c.m = clientMetrics{
		jobs: m.Counter("kelemetry.remotelinker.jobs",
			"Link jobs sent to remote linkers, by linker and result (ok, timeout, no_responders, skipped, bad_reply, remote_error, error).", "", jobSets...),
		links: m.Counter("kelemetry.remotelinker.links", "Links received from remote linkers, by linker.", "", attribute.NewSet(linker)),
		bytes: m.Counter("kelemetry.remotelinker.bytes", "Bytes of link jobs sent and results received, by linker and direction (sent, received).", "By", byteSets...),
		duration: m.Histogram("kelemetry.remotelinker.duration", "Time from sending a link job to its result, by linker.", "s",
			0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10),
		bodiesDropped: m.Counter("kelemetry.remotelinker.bodies.dropped",
			"Link jobs sent without the object's body, which was larger than the NATS servers' maximum payload, by linker.", "", attribute.NewSet(linker)),
	}
	if err := m.Err(); err != nil {
		return nil, fmt.Errorf("remotelinker: %w", err)
	}
	return c, nil
}

// Name implements aggregator.Linker: the configured name.
func (c *Client) Name() string { return c.cfg.Name }

// LinkWorkers implements aggregator.IsolatedLinker: MaxInFlight.
func (c *Client) LinkWorkers() int { return c.cfg.MaxInFlight }

// Config returns the effective configuration.
func (c *Client) Config() LinkerConfig { return c.cfg }

// Lookup implements aggregator.Linker: one request, bounded by the configured Timeout (and ctx).
// Its errors wrap errBusy, errNoWorker, errTimeout, errBadReply, errRemote or errNotConnected.
func (c *Client) Lookup(ctx context.Context, obj aggregator.Object) ([]aggregator.Link, error) {
	select {
	case c.sem <- struct{}{}:
		defer func() { <-c.sem }()
	default:
		c.count(ctx, resultSkipped)
		return nil, errBusy
	}
	links, result, err := c.lookup(ctx, obj)
	c.count(ctx, result)
	if err != nil {
		return nil, fmt.Errorf("remote linker %s: %s: %w", c.cfg.Name, obj.String(), err)
	}
	c.m.links.Add(ctx, int64(len(links)), c.attrs)
	return links, nil
}

func (c *Client) lookup(ctx context.Context, obj aggregator.Object) ([]aggregator.Link, string, error) {
	nc := c.conn()
	if nc == nil {
		return nil, resultError, errNotConnected
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	timeout := c.cfg.Timeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	job := wireJob{Version: wireVersion, Linker: c.cfg.Name, Object: obj.ObjectRef, MetaHash: obj.MetaHash,
		Sent: time.Now().UTC(), TimeoutMillis: max(1, timeout.Milliseconds())}
	if len(obj.Body) > 0 {
		job.Body = obj.Body
	}
	data, err := json.Marshal(job)
	if err == nil && int64(len(data)) > nc.MaxPayload() && job.Body != nil {
		// Too large for the servers: send the reference only (the worker fetches the object
		// itself, or finds nothing, as for an object seen without a body).
		job.Body = nil
		data, err = json.Marshal(job)
		c.m.bodiesDropped.Add(ctx, 1, c.attrs)
	}
	if err != nil {
		return nil, resultError, fmt.Errorf("encode job: %w", err)
	}
	c.m.bytes.Add(ctx, int64(len(data)), metric.WithAttributes(attribute.String("linker", c.cfg.Name), attribute.String("direction", "sent")))
	start := time.Now()
	msg, err := nc.RequestWithContext(ctx, c.cfg.Subject, data)
	c.m.duration.Record(ctx, time.Since(start).Seconds(), c.attrs)
	switch {
	case err == nil:
	case errors.Is(err, nats.ErrNoResponders):
		return nil, resultNoResponders, fmt.Errorf("%w on %s: %w", errNoWorker, c.cfg.Subject, err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return nil, resultTimeout, fmt.Errorf("%w after %s: %w", errTimeout, time.Since(start).Round(time.Millisecond), err)
	default:
		return nil, resultError, fmt.Errorf("request: %w", err)
	}
	c.m.bytes.Add(ctx, int64(len(msg.Data)), metric.WithAttributes(attribute.String("linker", c.cfg.Name), attribute.String("direction", "received")))
	links, err := decodeResult(msg.Data, c.cfg.MaxLinks)
	switch {
	case err == nil:
		return links, resultOK, nil
	case errors.Is(err, errTimeout):
		return nil, resultTimeout, err
	case errors.Is(err, errRemote):
		return nil, resultRemoteError, err
	default:
		return nil, resultBadReply, err
	}
}

func (c *Client) count(ctx context.Context, result string) {
	c.m.jobs.Add(ctx, 1, metric.WithAttributes(attribute.String("linker", c.cfg.Name), attribute.String("result", result)))
}

package natslog

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"

	"github.com/kelemetry/kelemetry/natsqueue"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrFull means the stream is at its MaxMsgs or MaxBytes limit and discarded the message: retry
// later (the webhook answers 429 with Retry-After).
var ErrFull = errors.New("natsqueue: stream full")

// ErrUnavailable means NATS is unreachable or JetStream has no quorum for the stream: retry
// later (the webhook answers 503).
var ErrUnavailable = errors.New("natsqueue: NATS unavailable")

// Partition returns the partition of an object key: FNV-1a of the key modulo partitions, so
// every producer agrees without coordination. partitions <= 0 yields 0.
func Partition(key string, partitions int) int {
	if partitions <= 0 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(partitions))
}

// Subject returns the subject of a message of cluster in partition.
func Subject(c natsqueue.Config, cluster string, partition int) string {
	return c.SubjectPrefix + "." + cluster + "." + strconv.Itoa(partition)
}

// deadSubject returns the dead-letter subject of a message of cluster in partition.
func deadSubject(c natsqueue.Config, cluster string, partition int) string {
	return c.SubjectPrefix + ".dead." + cluster + "." + strconv.Itoa(partition)
}

func deadStream(c natsqueue.Config) string { return c.Stream + "_DEAD" }

// historyStream sources the stream and keeps its messages after their acknowledgement, for
// warm-ups. Each of its messages carries its sequence in the stream (header Nats-Stream-Source,
// or headerStreamSeq on the copies a consumer writes while the sourcing lags: historyCopySubject).
func historyStream(c natsqueue.Config) string { return c.Stream + "_HISTORY" }

// historyCopySubject is the subject of a message's copy in the history stream, written by the
// consumer when the history's sourcing lags (a NATS node went away and the source consumer is
// being set up again, which JetStream retries with a backoff of up to two minutes).
func historyCopySubject(c natsqueue.Config, cluster string, partition int) string {
	return c.SubjectPrefix + ".history." + cluster + "." + strconv.Itoa(partition)
}

// membersBucket is the key-value bucket of live members (elastic or static membership).
func membersBucket(c natsqueue.Config) string { return c.Stream + "_MEMBERS" }

func consumerName(c natsqueue.Config, partition int) string {
	return fmt.Sprintf("%s_p%d", c.Stream, partition)
}

// validCluster reports whether cluster can be one subject token.
func validCluster(cluster string) error {
	if cluster == "" || strings.ContainsAny(cluster, ". *>\t\r\n") {
		return fmt.Errorf("cluster %q: must be a non-empty subject token (no '.', '*', '>' or whitespace)", cluster)
	}
	return nil
}

// ensureStreams creates or updates the message stream and the dead-letter stream.
func ensureStreams(ctx context.Context, js jetstream.JetStream, cfg natsqueue.Config) error {
	maxBytes, maxMsgs := cfg.MaxBytes, cfg.MaxMsgs
	if maxBytes == 0 {
		maxBytes = -1
	}
	if maxMsgs == 0 {
		maxMsgs = -1
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        cfg.Stream,
		Description: "Kelemetry audit events, partitioned by object",
		Subjects:    []string{cfg.SubjectPrefix + ".*.*"},
		Retention:   jetstream.WorkQueuePolicy,
		Discard:     jetstream.DiscardNew,
		MaxBytes:    maxBytes,
		MaxMsgs:     maxMsgs,
		Replicas:    cfg.Replicas,
		Storage:     jetstream.FileStorage,
	}); err != nil {
		return fmt.Errorf("create stream %s: %w", cfg.Stream, classify(err))
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        deadStream(cfg),
		Description: "Kelemetry audit events that kept failing",
		Subjects:    []string{cfg.SubjectPrefix + ".dead.*.*"},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxMsgs:     cfg.DeadMaxMsgs,
		Replicas:    cfg.Replicas,
		Storage:     jetstream.FileStorage,
	}); err != nil {
		return fmt.Errorf("create stream %s: %w", deadStream(cfg), classify(err))
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        historyStream(cfg),
		Description: "Kelemetry audit events kept after their acknowledgement, to rebuild state on takeover",
		Sources:     []*jetstream.StreamSource{{Name: cfg.Stream}},
		Subjects:    []string{cfg.SubjectPrefix + ".history.*.*"},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      cfg.HistoryMaxAge,
		MaxBytes:    cfg.HistoryMaxBytes,
		Replicas:    cfg.Replicas,
		Storage:     jetstream.FileStorage,
	}); err != nil {
		return fmt.Errorf("create stream %s: %w", historyStream(cfg), classify(err))
	}
	return nil
}

// errorKind names the class of a publish error for metrics: "full", "unavailable" or "other".
func errorKind(err error) string {
	switch {
	case errors.Is(err, ErrFull):
		return "full"
	case errors.Is(err, ErrUnavailable):
		return "unavailable"
	default:
		return "other"
	}
}

// classify wraps err with ErrFull or ErrUnavailable when it is one of those; other errors (a
// message larger than the stream allows, a canceled context) are returned as they are.
func classify(err error) error {
	if err == nil || errors.Is(err, ErrFull) || errors.Is(err, ErrUnavailable) {
		return err
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		desc := apiErr.Description
		if strings.Contains(desc, "maximum messages") || strings.Contains(desc, "maximum bytes") ||
			strings.Contains(desc, "resource limits exceeded") || strings.Contains(desc, "insufficient resources") {
			return fmt.Errorf("%w: %w", ErrFull, err)
		}
		if apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum {
			return err
		}
		if apiErr.Code == 503 || apiErr.Code == 408 || apiErr.Code == 500 {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return err
	}
	switch {
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrConnectionClosed),
		errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrReconnectBufExceeded),
		errors.Is(err, nats.ErrNoServers), errors.Is(err, nats.ErrDisconnected),
		errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, jetstream.ErrAsyncPublishTimeout),
		errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount),
		errors.Is(err, jetstream.ErrTooManyStalledMsgs), isConnErr(err):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// isConnErr reports errors that only say the connection is unusable: the client's own
// connection states, and the socket's errors when a server goes away under a write (a broken
// pipe or reset while the client has not yet noticed the loss and still flushes to it).
func isConnErr(err error) bool {
	if errors.Is(err, nats.ErrConnectionDraining) || errors.Is(err, nats.ErrStaleConnection) ||
		errors.Is(err, nats.ErrAuthorization) {
		return true
	}
	if errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return true
	}
	var opErr *net.OpError
	return errors.As(err, &opErr)
}

// priorityGroup is the pinned-client priority group every partition consumer declares.
const priorityGroup = "kelemetry"

package natsqueue

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Defaults of Config.
const (
	defaultStream           = "KELEMETRY_AUDIT"
	defaultSubjectPrefix    = "kelemetry.audit"
	defaultPartitions       = 16
	defaultReplicas         = 1
	defaultAckWait          = 30 * time.Second
	defaultMaxDeliveries    = 5
	defaultRetryBackoff     = 200 * time.Millisecond
	defaultMaxRetryBackoff  = 5 * time.Second
	defaultMaxInFlight      = 64
	defaultPinnedTTL        = 10 * time.Second
	defaultConnectTimeout   = 5 * time.Second
	defaultPublishTimeout   = 5 * time.Second
	defaultReconnectWait    = 200 * time.Millisecond
	defaultMaxReconnectWait = 5 * time.Second
	defaultMaxPending       = 4096
	defaultDeadMaxMsgs      = 100_000
	defaultHistoryMaxAge    = 15 * time.Minute
	defaultHistoryMaxBytes  = 256 << 20
	defaultWarmLookback     = 100_000
	defaultWarmTimeout      = 10 * time.Second
	defaultHistoryWait      = 2 * time.Second
)

// Config says where NATS is, how the stream is laid out and how consumption behaves. The zero
// value plus URLs is usable: WithDefaults fills the rest. Its connection settings (URLs, TLS,
// CredentialsFile, NKeySeedFile, ConnectTimeout, ReconnectWait, MaxReconnectWait, Name) are the
// keys of Conn, which Config.Conn returns.
type Config struct {
	// URLs are the NATS servers (nats://host:4222, tls://...); required.
	URLs []string `yaml:"urls"`
	// Stream is the JetStream stream of audit messages (default KELEMETRY_AUDIT). Dead letters
	// go to the stream <Stream>_DEAD.
	Stream string `yaml:"stream"`
	// SubjectPrefix starts every subject: <prefix>.<cluster>.<partition> for messages,
	// <prefix>.dead.<cluster>.<partition> for dead letters (default kelemetry.audit).
	SubjectPrefix string `yaml:"subjectPrefix"`
	// Partitions is the number of partitions of the object key space (default 16). Changing it
	// moves objects between partitions: drain the stream first.
	Partitions int `yaml:"partitions"`
	// Replicas is the stream's replication factor R (default 1; 3 on a 3-node cluster).
	Replicas int `yaml:"replicas"`
	// MaxBytes and MaxMsgs bound the stream (0: unbounded). At a limit the stream discards new
	// messages and Publish returns ErrFull.
	MaxBytes int64 `yaml:"maxBytes"`
	// MaxMsgs bounds the number of messages in the stream (0: unbounded).
	MaxMsgs int64 `yaml:"maxMsgs"`
	// AckWait is how long the server waits for an acknowledgement before it redelivers
	// (default 30s).
	AckWait time.Duration `yaml:"ackWait"`
	// MaxDeliveries is how many times a failing message is handed to the Handler before it is
	// moved to the dead-letter stream (default 5).
	MaxDeliveries int `yaml:"maxDeliveries"`
	// RetryBackoff is the wait before the first retry of a failed message; it doubles up to
	// MaxRetryBackoff (defaults 200ms and 5s).
	RetryBackoff time.Duration `yaml:"retryBackoff"`
	// MaxRetryBackoff caps RetryBackoff's doubling.
	MaxRetryBackoff time.Duration `yaml:"maxRetryBackoff"`
	// MaxInFlight bounds the unacknowledged messages of one partition held by a member
	// (default 64), and so the batches a member handles (in order, then one Committer call and
	// the acknowledgements per batch of the messages at hand); when a member dies, its
	// unacknowledged messages come back after AckWait, possibly after newer ones of the same
	// partition reached the standby. 1 keeps the order strict across a crash, at a throughput
	// cost.
	MaxInFlight int `yaml:"maxInFlight"`
	// PinnedTTL is how long a partition stays pinned to a member that stopped pulling: the
	// takeover time when a member dies (default 10s).
	PinnedTTL time.Duration `yaml:"pinnedTTL"`
	// DeadMaxMsgs bounds the dead-letter stream; the oldest dead letters go first (default
	// 100000).
	DeadMaxMsgs int64 `yaml:"deadMaxMsgs"`
	// MaxPending bounds the asynchronous publishes awaiting their acknowledgement (default 4096).
	MaxPending int `yaml:"maxPending"`
	// PublishTimeout bounds the wait for JetStream's acknowledgement of a message (default 5s).
	PublishTimeout time.Duration `yaml:"publishTimeout"`
	// ConnectTimeout bounds a connection attempt to one server (default 5s).
	ConnectTimeout time.Duration `yaml:"connectTimeout"`
	// ReconnectWait is the first wait between reconnection attempts; it doubles up to
	// MaxReconnectWait, with jitter (defaults 200ms and 5s).
	ReconnectWait time.Duration `yaml:"reconnectWait"`
	// MaxReconnectWait caps ReconnectWait's doubling.
	MaxReconnectWait time.Duration `yaml:"maxReconnectWait"`
	// TLS configures TLS to the servers.
	TLS tlsConfig `yaml:"tls"`
	// CredentialsFile is a NATS credentials file (user JWT and NKey seed).
	CredentialsFile string `yaml:"credentialsFile"`
	// NKeySeedFile is a file holding an NKey seed (exclusive with CredentialsFile).
	NKeySeedFile string `yaml:"nkeySeedFile"`
	// HistoryMaxAge and HistoryMaxBytes bound the history stream <Stream>_HISTORY, a mirror of
	// the stream that keeps messages after their acknowledgement (the stream itself is a work
	// queue): a member that takes a partition over reads the partition's recent history from it
	// to rebuild its state (see WithWarmer). Defaults 15m and 256 MiB.
	HistoryMaxAge time.Duration `yaml:"historyMaxAge"`
	// HistoryMaxBytes bounds the history stream's size; the oldest messages go first.
	HistoryMaxBytes int64 `yaml:"historyMaxBytes"`
	// WarmLookback bounds a takeover's warm-up: it reads the partition's messages among the
	// WarmLookback stream messages before the first one it processes (default 100000).
	WarmLookback int `yaml:"warmLookback"`
	// WarmTimeout bounds a takeover's warm-up in time (default 10s); processing starts when it
	// ends, warmed or not.
	WarmTimeout time.Duration `yaml:"warmTimeout"`
	// HistoryWait bounds how long a handled batch waits for the history stream's sourcing to
	// copy its messages before they are acknowledged (default 2s; 100ms while the sourcing has
	// made no progress for HistoryWait). The stream deletes a message once it is acknowledged, so
	// one the history lacked would be missing from every later warm-up; past the bound the
	// consumer copies the messages into the history itself (<SubjectPrefix>.history.<cluster>.<p>,
	// kelemetry_natsqueue_history_copied_total). The sourcing lags while a NATS node goes away:
	// JetStream sets its source consumer up again with a backoff of up to two minutes.
	HistoryWait time.Duration `yaml:"historyWait"`
	// Members and Member choose how partitions spread over replicas. With Members 0 (the
	// default) the spread is elastic: each member announces itself in the key-value bucket
	// <Stream>_MEMBERS (an entry that expires after PinnedTTL unless renewed), and with n live
	// members sorted by their random IDs, the member of rank r pulls the partitions p with
	// p % n == r; a member that is no longer assigned a partition finishes its message in
	// progress, returns the ones it pulled and unpins the partition, so that adding a replica
	// spreads the partitions and a member that dies has its partitions taken over within about
	// PinnedTTL. With Members > 0 the membership is static: the member with index Member
	// (0..Members-1, e.g. a StatefulSet ordinal) owns the partitions p with p % Members ==
	// Member; the partitions of members that are not live go to the live ones (p modulo their
	// number), and back to their owner when it returns.
	Members int `yaml:"members"`
	// Member is this replica's index among Members.
	Member int `yaml:"member"`
	// Name is the connection's name shown by the server's monitoring (default "kelemetry").
	Name string `yaml:"name"`
}

// tlsConfig are the files of TLS to NATS. All empty means no client TLS configuration (tls://
// URLs still verify the server against the system roots).
type tlsConfig struct {
	// CAFile verifies the servers' certificates.
	CAFile string `yaml:"caFile"`
	// CertFile and KeyFile are the client certificate and its key (both or neither).
	CertFile string `yaml:"certFile"`
	// KeyFile is the client certificate's key.
	KeyFile string `yaml:"keyFile"`
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	setStr := func(p *string, d string) {
		if *p == "" {
			*p = d
		}
	}
	setInt := func(p *int, d int) {
		if *p <= 0 {
			*p = d
		}
	}
	setDur := func(p *time.Duration, d time.Duration) {
		if *p <= 0 {
			*p = d
		}
	}
	setStr(&c.Stream, defaultStream)
	setStr(&c.SubjectPrefix, defaultSubjectPrefix)
	setStr(&c.Name, defaultName)
	setInt(&c.Partitions, defaultPartitions)
	setInt(&c.Replicas, defaultReplicas)
	setInt(&c.MaxDeliveries, defaultMaxDeliveries)
	setInt(&c.MaxInFlight, defaultMaxInFlight)
	setInt(&c.MaxPending, defaultMaxPending)
	setDur(&c.AckWait, defaultAckWait)
	setDur(&c.RetryBackoff, defaultRetryBackoff)
	setDur(&c.MaxRetryBackoff, defaultMaxRetryBackoff)
	setDur(&c.PinnedTTL, defaultPinnedTTL)
	setDur(&c.PublishTimeout, defaultPublishTimeout)
	setDur(&c.ConnectTimeout, defaultConnectTimeout)
	setDur(&c.ReconnectWait, defaultReconnectWait)
	setDur(&c.MaxReconnectWait, defaultMaxReconnectWait)
	if c.DeadMaxMsgs <= 0 {
		c.DeadMaxMsgs = defaultDeadMaxMsgs
	}
	setDur(&c.HistoryMaxAge, defaultHistoryMaxAge)
	if c.HistoryMaxBytes <= 0 {
		c.HistoryMaxBytes = defaultHistoryMaxBytes
	}
	setInt(&c.WarmLookback, defaultWarmLookback)
	setDur(&c.WarmTimeout, defaultWarmTimeout)
	setDur(&c.HistoryWait, defaultHistoryWait)
	return c
}

// Validate reports an unusable configuration: the errors of Conn.Validate (no URL, half a client
// certificate, both credential kinds, files that cannot be read), a bad stream name or subject
// prefix, a replication factor other than 1, 3 or 5, or negative limits.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs []error
	if err := c.Conn().Validate(); err != nil {
		errs = append(errs, err)
	}
	if strings.ContainsAny(c.Stream, ". *>\t\n/\\") {
		errs = append(errs, fmt.Errorf("stream %q: must not contain '.', '*', '>', '/', '\\' or whitespace", c.Stream))
	}
	for _, tok := range strings.Split(c.SubjectPrefix, ".") {
		if tok == "" || strings.ContainsAny(tok, " *>\t\n") {
			errs = append(errs, fmt.Errorf("subjectPrefix %q: tokens must be non-empty literals", c.SubjectPrefix))
			break
		}
	}
	if c.Replicas != 1 && c.Replicas != 3 && c.Replicas != 5 {
		errs = append(errs, fmt.Errorf("replicas %d: must be 1, 3 or 5", c.Replicas))
	}
	if c.PinnedTTL < 2*time.Second {
		errs = append(errs, fmt.Errorf("pinnedTTL %s: must be at least 2s (pulls renew the pin every pinnedTTL/2, at least 1s)", c.PinnedTTL))
	}
	if c.MaxBytes < 0 || c.MaxMsgs < 0 {
		errs = append(errs, errors.New("maxBytes and maxMsgs must not be negative"))
	}
	if c.Members < 0 || c.Member < 0 || (c.Members > 0 && c.Member >= c.Members) || (c.Members == 0 && c.Member != 0) {
		errs = append(errs, fmt.Errorf("member %d of %d members: need 0 <= member < members", c.Member, c.Members))
	}
	return errors.Join(errs...)
}

package leader

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"k8s.io/client-go/tools/leaderelection"
)

// Defaults for Config.
const (
	DefaultLeaseName      = "kelemetry-diff-informer"
	defaultLeaseNamespace = "kube-system"
	defaultLeaseDuration  = 15 * time.Second
	defaultRenewDeadline  = 10 * time.Second
	defaultRetryPeriod    = 2 * time.Second
)

// Config configures the leader election of the informer diff source: with several
// replicas, every replica watches (so that a new leader has the last versions at hand), but only
// the holder of a coordination.k8s.io/v1 Lease records into the change cache. The zero value is
// off.
type Config struct {
	Enabled bool `yaml:"enabled"`
	// Cluster holds the Lease (default: the first watched cluster).
	Cluster string `yaml:"cluster"`
	// LeaseName and LeaseNamespace name the Lease (default kelemetry-diff-informer in
	// kube-system).
	LeaseName      string `yaml:"leaseName"`
	LeaseNamespace string `yaml:"leaseNamespace"`
	// Identity is this replica's name in the Lease (default: hostname_pid).
	Identity string `yaml:"identity"`
	// LeaseDuration, RenewDeadline and RetryPeriod as in client-go's leaderelection (default
	// 15s, 10s, 2s). LeaseDuration is stored in whole seconds, at least 1s.
	LeaseDuration time.Duration `yaml:"leaseDuration"`
	RenewDeadline time.Duration `yaml:"renewDeadline"`
	RetryPeriod   time.Duration `yaml:"retryPeriod"`
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.LeaseName == "" {
		c.LeaseName = DefaultLeaseName
	}
	if c.LeaseNamespace == "" {
		c.LeaseNamespace = defaultLeaseNamespace
	}
	if c.Identity == "" {
		host, _ := os.Hostname()
		c.Identity = host + "_" + strconv.Itoa(os.Getpid())
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = defaultLeaseDuration
	}
	if c.RenewDeadline == 0 {
		c.RenewDeadline = defaultRenewDeadline
	}
	if c.RetryPeriod == 0 {
		c.RetryPeriod = defaultRetryPeriod
	}
	return c
}

// Validate reports a configuration that cannot work (after WithDefaults).
func (c Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	c = c.WithDefaults()
	if c.LeaseDuration < 0 || c.RenewDeadline < 0 || c.RetryPeriod < 0 {
		return errors.New("diff informer leader election: durations must not be negative")
	}
	if c.LeaseDuration < time.Second {
		// The Lease holds whole seconds (spec.leaseDurationSeconds): less reads as 0, an expired
		// Lease that every replica would take.
		return errors.New("diff informer leader election: leaseDuration must be at least 1s")
	}
	if c.LeaseDuration <= c.RenewDeadline {
		return errors.New("diff informer leader election: leaseDuration must be greater than renewDeadline")
	}
	if float64(c.RenewDeadline) <= leaderelection.JitterFactor*float64(c.RetryPeriod) {
		return fmt.Errorf("diff informer leader election: renewDeadline must be greater than %.1f × retryPeriod", leaderelection.JitterFactor)
	}
	return nil
}

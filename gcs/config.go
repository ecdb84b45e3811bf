package gcs

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/rs/zerolog"

	"github.com/raygo-dev/raygo/gcs/store"
	"github.com/raygo-dev/raygo/internal/membership"
)

// DefaultPort is the GCS's gRPC port, as --port defaults to.
const DefaultPort = 6380

// Config of a GCS server. Use DefaultConfig and change what you need.
type Config struct {
	// NodeIP is the address the GCS binds to and advertises (gRPC and memberlist).
	NodeIP string
	// Port is the gRPC port; 0 picks a free one.
	Port int
	// GossipPort is the memberlist port; 0 (the default) picks a free one.
	GossipPort int
	// Store holds the tables. Required. The server closes it on Stop.
	Store store.Store
	// ReconnectGrace is how long, after a start that reloaded nodes from the store, a
	// node that was ALIVE has to reconnect before it is marked DEAD. Default 30 s. One
	// whose raylet address refuses connections is DEAD from a tenth of it on.
	ReconnectGrace time.Duration
	// NodeTimeout: a node that registered or reported to this GCS and then sends no
	// heartbeat for this long is DEAD, whatever memberlist says (a registration that
	// never gossips or heartbeats). Raylets send a keep-alive every 5 s. Default 30 s;
	// zero turns the check off.
	NodeTimeout time.Duration
	// JobLeaseTimeout is how long a driver may go without renewing its job lease before
	// the job is dead. Default 30 s.
	JobLeaseTimeout time.Duration
	// MaxExecutableBytes is the largest worker executable UploadExecutable accepts, in
	// bytes. Default 1 GiB.
	MaxExecutableBytes int64
	// ExecutableGracePeriod is how long an uploaded executable that no live job or
	// actor names stays stored after its last use (its upload, a HasExecutable or
	// download, the end of the last job or actor that named it) before it is deleted, so
	// a driver re-run soon after reuses the upload. Default 10 min.
	ExecutableGracePeriod time.Duration
	// DeadActorRetention is how long a DEAD actor stays listed after its death (Ray keeps
	// dead actors for its state API). Default 1 h.
	DeadActorRetention time.Duration
	// MaxDeadActors is how many DEAD actors stay listed at most; the oldest deaths are
	// forgotten first. Default 1000.
	MaxDeadActors int
	// Membership timers; the zero value takes membership.DefaultConfig.
	Membership membership.Config
	// DashboardAddress is where the head serves /metrics, the dashboard and Ray's state
	// API (HOST:PORT; port 0 picks a free one); empty: not served. A port already taken
	// is logged, not fatal.
	DashboardAddress string
	// AuthToken, when set, is the cluster token (internal/auth): every call to the GCS
	// must carry it, its calls to raylets carry it, and the gossip is encrypted with a
	// key derived from it. Empty: auth disabled.
	AuthToken string
	// WrapReserver, when set, wraps the raylet side of the two-phase reservation
	// (BundleReserver): a decorator sees every prepare, commit, cancel and release-unused
	// call, in the order the GCS makes them (commits only after the group is persisted
	// PREPARED), and may delay or fail them. Nil uses the raylets as they are.
	WrapReserver func(BundleReserver) BundleReserver
	// Queues, when set, turns admission on: a queue configuration (YAML, package
	// admission/queues; raygo start --queues) into whose quotas placement groups are
	// admitted before they are placed. It seeds the store; a configuration already there
	// (from `raygo queues apply`) wins. Nil (the default) places groups as they come.
	Queues []byte
	// Now is the clock (tests may replace it). Default time.Now.
	Now    func() time.Time
	Logger zerolog.Logger
}

// DefaultConfig returns a GCS on 127.0.0.1:6380 with the timers documented on Config.
// Store must still be set.
func DefaultConfig() Config {
	return Config{
		NodeIP:                "127.0.0.1",
		Port:                  DefaultPort,
		ReconnectGrace:        30 * time.Second,
		NodeTimeout:           30 * time.Second,
		JobLeaseTimeout:       30 * time.Second,
		MaxExecutableBytes:    1 << 30,
		ExecutableGracePeriod: 10 * time.Minute,
		DeadActorRetention:    time.Hour,
		MaxDeadActors:         1000,
		Membership:            membership.DefaultConfig(),
		Now:                   time.Now,
		Logger:                zerolog.Nop(),
	}
}

// Validate reports the first bad field.
func (c Config) Validate() error {
	if net.ParseIP(c.NodeIP) == nil {
		return fmt.Errorf("gcs config: NodeIP %q is not an IP address", c.NodeIP)
	}
	if c.Port < 0 || c.Port > 65535 {
		return fmt.Errorf("gcs config: Port %d out of range 0-65535", c.Port)
	}
	if c.GossipPort < 0 || c.GossipPort > 65535 {
		return fmt.Errorf("gcs config: GossipPort %d out of range 0-65535", c.GossipPort)
	}
	if c.Store == nil {
		return errors.New("gcs config: Store is required")
	}
	if c.ReconnectGrace <= 0 {
		return fmt.Errorf("gcs config: ReconnectGrace %s must be positive", c.ReconnectGrace)
	}
	if c.JobLeaseTimeout <= 0 {
		return fmt.Errorf("gcs config: JobLeaseTimeout %s must be positive", c.JobLeaseTimeout)
	}
	if c.MaxExecutableBytes <= 0 {
		return fmt.Errorf("gcs config: MaxExecutableBytes %d must be positive", c.MaxExecutableBytes)
	}
	if c.ExecutableGracePeriod <= 0 {
		return fmt.Errorf("gcs config: ExecutableGracePeriod %s must be positive", c.ExecutableGracePeriod)
	}
	if c.DeadActorRetention <= 0 {
		return fmt.Errorf("gcs config: DeadActorRetention %s must be positive", c.DeadActorRetention)
	}
	if c.MaxDeadActors < 0 {
		return fmt.Errorf("gcs config: MaxDeadActors %d must not be negative", c.MaxDeadActors)
	}
	if c.Now == nil {
		return errors.New("gcs config: Now is required")
	}
	return nil
}

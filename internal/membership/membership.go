// Package membership wraps hashicorp/memberlist with the timers raygo needs: a raylet
// killed with SIGKILL must be declared dead within 10 s even in a cluster of a handful of
// members, where memberlist's LAN defaults (suspicion scaled for large clusters and
// stretched up to 6× without confirmations) take far longer.
package membership

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
)

// Config of one memberlist agent. Zero durations take the defaults of DefaultConfig.
type Config struct {
	// Name must be unique in the cluster for the life of the member: raylets use their
	// node id, a GCS "gcs-<epoch>" (memberlist refuses a restarted member that reuses a
	// name with a lower incarnation).
	Name string
	// BindIP is the address to bind to and to advertise.
	BindIP string
	// Port to bind (UDP and TCP); 0 picks a free one.
	Port int
	// Meta is gossiped with the member (at most 512 bytes).
	Meta Meta
	// ProbeInterval is how often each member probes one random peer. Default 1 s.
	ProbeInterval time.Duration
	// ProbeTimeout is how long a direct probe waits for an ack before indirect probes.
	// Default 500 ms.
	ProbeTimeout time.Duration
	// SuspicionMult scales the time a suspected member has to refute before it is
	// declared dead: SuspicionMult × max(1, log10(members)) × ProbeInterval. Default 3,
	// i.e. 3 s up to 10 members and 6 s up to 100. Worst-case detection of a killed
	// member is about one probe round (≤ members × ProbeInterval / (members-1) ≈ 1–2 s)
	// plus the suspicion time: ≈ 5 s for a small cluster, inside the 10 s target.
	SuspicionMult int
	// GossipInterval is how often gossip is pushed to a few peers. Default 200 ms.
	GossipInterval time.Duration
	// LogOutput receives memberlist's own log lines; nil discards them.
	LogOutput io.Writer
	// SecretKey, when set (16, 24 or 32 bytes), encrypts and authenticates all gossip:
	// a member without it can neither join nor be heard.
	SecretKey []byte
}

// Meta is the metadata a member gossips.
type Meta struct {
	// Kind is "raylet" or "gcs".
	Kind          string `json:"kind"`
	NodeID        string `json:"node_id,omitempty"`
	RayletAddress string `json:"raylet_address,omitempty"`
}

// DefaultConfig returns the timers described on Config.
func DefaultConfig() Config {
	return Config{
		ProbeInterval:  time.Second,
		ProbeTimeout:   500 * time.Millisecond,
		SuspicionMult:  3,
		GossipInterval: 200 * time.Millisecond,
	}
}

// Events receives membership changes. Calls come from memberlist's goroutines, one at a
// time; they must not block.
type Events interface {
	MemberJoined(name string, meta Meta)
	MemberFailed(name string, meta Meta)
}

// Agent is a running memberlist member.
type Agent struct {
	list *memberlist.Memberlist
	// keyring holds the gossip key (nil without one).
	keyring *memberlist.Keyring
}

// Start creates the member and binds its ports. It joins no one: call Join.
func Start(cfg Config, events Events) (*Agent, error) {
	defaults := DefaultConfig()
	if cfg.ProbeInterval == 0 {
		cfg.ProbeInterval = defaults.ProbeInterval
	}
	if cfg.ProbeTimeout == 0 {
		cfg.ProbeTimeout = defaults.ProbeTimeout
	}
	if cfg.SuspicionMult == 0 {
		cfg.SuspicionMult = defaults.SuspicionMult
	}
	if cfg.GossipInterval == 0 {
		cfg.GossipInterval = defaults.GossipInterval
	}
	meta, err := json.Marshal(cfg.Meta)
	if err != nil {
		return nil, fmt.Errorf("membership meta: %w", err)
	}
	if len(meta) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("membership meta: %d bytes, memberlist allows %d", len(meta), memberlist.MetaMaxSize)
	}
	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.Name
	mc.BindAddr = cfg.BindIP
	mc.BindPort = cfg.Port
	mc.AdvertiseAddr = cfg.BindIP
	mc.AdvertisePort = cfg.Port
	mc.ProbeInterval = cfg.ProbeInterval
	mc.ProbeTimeout = cfg.ProbeTimeout
	mc.SuspicionMult = cfg.SuspicionMult
	// Without confirmations from other members, memberlist stretches the suspicion
	// timeout up to SuspicionMaxTimeoutMult times; a small cluster rarely has enough
	// members to confirm, so keep the timeout fixed.
	mc.SuspicionMaxTimeoutMult = 1
	mc.GossipInterval = cfg.GossipInterval
	mc.GossipToTheDeadTime = 5 * time.Second
	// A dead member's name may be reused at once (names are unique per incarnation anyway).
	mc.DeadNodeReclaimTime = time.Second
	mc.Delegate = metaDelegate(meta)
	var keyring *memberlist.Keyring
	if len(cfg.SecretKey) > 0 {
		var err error
		if keyring, err = memberlist.NewKeyring(nil, cfg.SecretKey); err != nil {
			return nil, fmt.Errorf("membership key: %w", err)
		}
		mc.Keyring = keyring
	}
	if events != nil {
		mc.Events = &eventAdapter{events: events}
	}
	out := cfg.LogOutput
	if out == nil {
		out = io.Discard
	}
	mc.Logger = log.New(out, "memberlist: ", 0)
	list, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("memberlist on %s:%d: %w", cfg.BindIP, cfg.Port, err)
	}
	return &Agent{list: list, keyring: keyring}, nil
}

// UseKey makes key the one the member encrypts with and accepts, in place of the one it
// started with (a raylet learns the cluster's key when it registers). A member started
// without a key has no encryption to change: that is an error.
func (a *Agent) UseKey(key []byte) error {
	if a.keyring == nil {
		return fmt.Errorf("membership: started without a key, it cannot take one")
	}
	old := a.keyring.GetPrimaryKey()
	if err := a.keyring.AddKey(key); err != nil {
		return fmt.Errorf("membership key: %w", err)
	}
	if err := a.keyring.UseKey(key); err != nil {
		return fmt.Errorf("membership key: %w", err)
	}
	if !bytes.Equal(old, key) {
		if err := a.keyring.RemoveKey(old); err != nil {
			return fmt.Errorf("membership key: %w", err)
		}
	}
	return nil
}

// Address is the host:port the member gossips on.
func (a *Agent) Address() string {
	n := a.list.LocalNode()
	return net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
}

// Join contacts the given members; it succeeds when at least one answers.
func (a *Agent) Join(addresses []string) (int, error) {
	if len(addresses) == 0 {
		return 0, nil
	}
	n, err := a.list.Join(addresses)
	if err != nil && n == 0 {
		return 0, fmt.Errorf("memberlist join %v: %w", addresses, err)
	}
	return n, nil
}

// Leave announces a clean departure (bounded by timeout) and stops the agent.
func (a *Agent) Leave(timeout time.Duration) {
	_ = a.list.Leave(timeout)
	_ = a.list.Shutdown()
}

// Shutdown stops the agent without telling anyone, as a crash would.
func (a *Agent) Shutdown() { _ = a.list.Shutdown() }

type metaDelegate []byte

func (d metaDelegate) NodeMeta(limit int) []byte                  { return d }
func (d metaDelegate) NotifyMsg([]byte)                           {}
func (d metaDelegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d metaDelegate) LocalState(join bool) []byte                { return nil }
func (d metaDelegate) MergeRemoteState(buf []byte, join bool)     {}

type eventAdapter struct{ events Events }

func (e *eventAdapter) NotifyJoin(n *memberlist.Node) {
	e.events.MemberJoined(n.Name, decodeMeta(n.Meta))
}
func (e *eventAdapter) NotifyLeave(n *memberlist.Node) {
	e.events.MemberFailed(n.Name, decodeMeta(n.Meta))
}
func (e *eventAdapter) NotifyUpdate(*memberlist.Node) {}

func decodeMeta(raw []byte) Meta {
	var m Meta
	_ = json.Unmarshal(raw, &m)
	return m
}

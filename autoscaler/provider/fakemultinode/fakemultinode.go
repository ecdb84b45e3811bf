// Package fakemultinode is the provider Ray calls fake_multinode: every node it launches
// is a real `raygo start --block` process on this machine that joins the cluster's GCS
// with the node type's resources, labels and simulated GPUs, after the cluster YAML's
// initialization and setup commands for the type have run in the node's shell. Its
// instances are kept in a JSON file in its directory, so an autoscaler that restarts
// finds them again and `raygo down` terminates them.
package fakemultinode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/raygo-dev/raygo/autoscaler/provider"
	"github.com/raygo-dev/raygo/internal/ids"
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/privdir"
	"github.com/raygo-dev/raygo/internal/proc"
)

// Config says where the provider keeps its state and how it starts nodes.
type Config struct {
	// Dir holds instances.json and each instance's output (logs/<id>.out). Created
	// owner-only if missing.
	Dir string
	// GCSAddress is the HOST:PORT nodes join.
	GCSAddress string
	// Raygo is the raygo executable nodes run; "" means this process's own executable.
	Raygo string
	// TempDir is the nodes' --temp-dir (their session directories, where `raygo stop`
	// finds them); "" leaves it to RAYGO_TEMP_DIR or raygo's default.
	TempDir string
	// NodeIP is the address every node binds to and advertises (default 127.0.0.1).
	NodeIP string
	// TerminateGrace is how long a terminated node has to stop after SIGTERM before it is
	// killed (default 15 s).
	TerminateGrace time.Duration
	// Now is the clock of LaunchedAt (default time.Now).
	Now func() time.Time
	// Commands gives a worker type's initialization and setup commands, in order
	// (clusterconfig.Config.NodeCommands); nil, or none returned, starts the node at once.
	// They run in /bin/sh (set -e, each command echoed) in the node's session, with their
	// output in the node's log; when one fails the shell exits and the node never starts.
	Commands func(nodeType string) (initialization, setup []string)
}

// Provider launches local raylet processes. It is safe for concurrent use; the state
// file is written by one Provider at a time (the autoscaler's, or `raygo down`'s once the
// head is stopped).
type Provider struct {
	cfg Config
	mu  sync.Mutex
}

var _ provider.Provider = (*Provider)(nil)

// record is one instance in instances.json.
type record struct {
	ID         string    `json:"id"`
	NodeType   string    `json:"node_type"`
	RequestID  string    `json:"request_id"`
	LaunchedAt time.Time `json:"launched_at"`
	PID        int       `json:"pid"`
}

// New checks the configuration and opens (or creates) the state directory.
func New(cfg Config) (*Provider, error) {
	if cfg.Dir == "" {
		return nil, errors.New("fake_multinode: Dir: empty")
	}
	if cfg.Raygo == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("fake_multinode: find the raygo executable: %w", err)
		}
		cfg.Raygo = self
	}
	if cfg.NodeIP == "" {
		cfg.NodeIP = "127.0.0.1"
	}
	if cfg.TerminateGrace <= 0 {
		cfg.TerminateGrace = 15 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := privdir.Ensure(filepath.Join(cfg.Dir, "logs")); err != nil {
		return nil, fmt.Errorf("fake_multinode: %w", err)
	}
	return &Provider{cfg: cfg}, nil
}

func (p *Provider) statePath() string { return filepath.Join(p.cfg.Dir, "instances.json") }

func (p *Provider) load() (map[string]record, error) {
	raw, err := os.ReadFile(p.statePath())
	if errors.Is(err, os.ErrNotExist) {
		return map[string]record{}, nil
	}
	if err != nil {
		return nil, err
	}
	var list []record
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("%s: %w", p.statePath(), err)
	}
	out := make(map[string]record, len(list))
	for _, r := range list {
		out[r.ID] = r
	}
	return out, nil
}

// save writes the table atomically (a crash leaves the old or the new file, whole).
func (p *Provider) save(table map[string]record) error {
	list := make([]record, 0, len(table))
	for _, id := range slices.Sorted(maps.Keys(table)) {
		list = append(list, table[id])
	}
	raw, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	tmp := p.statePath() + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p.statePath())
}

// Launch starts req.Count nodes. A node counts as launched once its process runs; it
// registers with the GCS some seconds later.
func (p *Provider) Launch(ctx context.Context, req provider.LaunchRequest) ([]provider.Instance, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	table, err := p.load()
	if err != nil {
		return nil, err
	}
	var started []record
	fail := func(err error) ([]provider.Instance, error) {
		for _, r := range started {
			p.kill(r, 0)
		}
		return nil, err
	}
	for range req.Count {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		id := "local-" + ids.Random(6)
		pid, err := p.start(id, req)
		if err != nil {
			return fail(fmt.Errorf("fake_multinode: start a %s node: %w", req.NodeType, err))
		}
		started = append(started, record{ID: id, NodeType: req.NodeType, RequestID: req.RequestID, LaunchedAt: p.cfg.Now(), PID: pid})
	}
	for _, r := range started {
		table[r.ID] = r
	}
	if err := p.save(table); err != nil {
		return fail(fmt.Errorf("fake_multinode: save instances: %w", err))
	}
	out := make([]provider.Instance, len(started))
	for i, r := range started {
		out[i] = r.instance()
	}
	return out, nil
}

func (r record) instance() provider.Instance {
	return provider.Instance{ID: r.ID, NodeType: r.NodeType, State: provider.InstanceRunning, LaunchedAt: r.LaunchedAt, RequestID: r.RequestID}
}

// startArgs are the `raygo` arguments that start instance id of req: a blocking
// `raygo start` joining the GCS with the type's resources and labels, and the instance's.
func (p *Provider) startArgs(id string, req provider.LaunchRequest) ([]string, error) {
	labels := maps.Clone(req.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[nodelabel.InstanceID] = id
	labels[nodelabel.NodeType] = req.NodeType
	node, err := provider.NodeArgs(req.Resources, req.GPUModel, labels)
	if err != nil {
		return nil, err
	}
	args := []string{"start", "--address", p.cfg.GCSAddress, "--block", "--node-ip-address", p.cfg.NodeIP, "--node-name", id}
	if p.cfg.TempDir != "" {
		args = append(args, "--temp-dir", p.cfg.TempDir)
	}
	return append(args, node...), nil
}

// start runs one node in its own session (it outlives an autoscaler restart) and
// returns its pid.
func (p *Provider) start(id string, req provider.LaunchRequest) (int, error) {
	args, err := p.startArgs(id, req)
	if err != nil {
		return 0, err
	}
	logPath := filepath.Join(p.cfg.Dir, "logs", id+".out")
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer out.Close()
	cmd := exec.Command(p.cfg.Raygo, args...)
	if script := p.setupScript(req.NodeType); script != "" {
		// sh -c SCRIPT NAME ARGS...: the script ends with exec "$0" "$@", the raylet.
		cmd = exec.Command(Shell, append([]string{"-c", script, p.cfg.Raygo}, args...)...)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	go func() { _ = cmd.Wait() }() // reaps it if it exits while this process lives
	return cmd.Process.Pid, nil
}

// setupScript is the shell script that runs the type's initialization and setup commands
// and then execs the node's `raygo start` (its "$0" "$@"); "" when there are none.
func (p *Provider) setupScript(nodeType string) string {
	if p.cfg.Commands == nil {
		return ""
	}
	script := SetupScript(p.cfg.Commands(nodeType))
	if script == "" {
		return ""
	}
	return script + "exec \"$0\" \"$@\"\n"
}

// SetupScript is a /bin/sh script that runs a node's initialization commands, then its
// setup commands, in order, each echoed (set -x) and the first failure ending it (set
// -e) after a last line saying so on stderr; "" when there are none. The fake_multinode
// provider runs it before each node's `raygo start`, and `raygo up` before the head's.
func SetupScript(initialization, setup []string) string {
	if len(initialization) == 0 && len(setup) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("trap 'status=$?; [ $status -eq 0 ] || echo \"raygo: a setup command failed (exit status $status); the node does not start\" >&2' EXIT\nset -ex\n")
	for _, part := range []struct {
		name     string
		commands []string
	}{{"initialization_commands", initialization}, {"setup_commands", setup}} {
		if len(part.commands) > 0 {
			b.WriteString("# " + part.name + "\n")
			for _, c := range part.commands {
				b.WriteString(c + "\n")
			}
		}
	}
	return b.String()
}

// Shell runs SetupScript.
const Shell = "/bin/sh"

// Terminate sends SIGTERM to each node and SIGKILL after the grace period; it returns at
// once. A node still stopping stays listed by Instances until its process is gone.
func (p *Provider) Terminate(_ context.Context, ids []string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	table, err := p.load()
	if err != nil {
		return err
	}
	for _, id := range ids {
		if r, ok := table[id]; ok {
			go p.kill(r, p.cfg.TerminateGrace)
		}
	}
	return nil
}

// kill stops r's process: SIGTERM, then SIGKILL after grace (at once for grace 0). A
// node still running its setup commands is its shell and their processes: the signals go
// to its whole process group (the node's session), so no command outlives it. Once the
// shell has exec'd `raygo start`, only that process is signalled, and it stops its
// raylet in order.
func (p *Provider) kill(r record, grace time.Duration) {
	if !p.alive(r) {
		return
	}
	target := r.PID
	if p.inSetup(r) {
		target = -r.PID // Setsid: the group's id is the shell's pid
	}
	_ = syscall.Kill(target, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !p.alive(r) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	if p.alive(r) {
		_ = syscall.Kill(target, syscall.SIGKILL)
	}
}

// inSetup: r's process is still the shell running its setup commands.
func (p *Provider) inSetup(r record) bool {
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(r.PID), "cmdline"))
	return err == nil && strings.HasPrefix(string(cmdline), Shell+"\x00-c\x00")
}

// alive reports whether r's process still runs: its pid is alive and its command line
// names the instance (a reused pid does not).
func (p *Provider) alive(r record) bool {
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(r.PID), "cmdline"))
	return err == nil && strings.Contains(string(cmdline), r.ID) && proc.Alive(r.PID)
}

// Instances lists the nodes whose processes still run, and forgets the others.
func (p *Provider) Instances(context.Context) ([]provider.Instance, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	table, err := p.load()
	if err != nil {
		return nil, err
	}
	changed := false
	var out []provider.Instance
	for _, id := range slices.Sorted(maps.Keys(table)) {
		r := table[id]
		if !p.alive(r) {
			delete(table, id)
			changed = true
			continue
		}
		out = append(out, r.instance())
	}
	if changed {
		if err := p.save(table); err != nil {
			return nil, err
		}
	}
	return out, nil
}

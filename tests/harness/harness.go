// Package harness starts real raygo clusters for multi-process tests: the raygo binary
// built once per test process, head and worker nodes started with `raygo start --block`
// on free loopback ports, and polling helpers with deadlines instead of sleeps.
package harness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/proc"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	"github.com/raygo-dev/raygo/internal/testutil/poll"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	// buildHome is HOME as the test process started: go build runs with it, so a test
	// that points HOME at a temporary directory (to hide a token file) before the first
	// build still uses the machine's module and build caches.
	buildHome = os.Getenv("HOME")
)

// Binary returns the path of a raygo binary built from this checkout (once per process).
// Every test process of one checkout shares the path, in the temporary directory: each
// builds to a file of its own and renames it over the path, so nothing accumulates from
// run to run, and a process still running the binary it replaced keeps running it.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binPath, buildErr = buildShared("github.com/raygo-dev/raygo/cmd/raygo", "raygo")
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// buildShared builds pkg into the checkout's shared binary directory under name (see
// Binary) and returns the path.
func buildShared(pkg, name string) (string, error) {
	_, self, _, _ := runtime.Caller(0)
	checkout := filepath.Dir(filepath.Dir(filepath.Dir(self)))
	sum := sha256.Sum256([]byte(checkout))
	dir := filepath.Join(os.TempDir(), "raygo-test-bin-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	own, err := os.CreateTemp(dir, name+".*.building")
	if err != nil {
		return "", err
	}
	own.Close()
	if err := goBuild(pkg, own.Name()); err != nil {
		os.Remove(own.Name())
		return "", err
	}
	out := filepath.Join(dir, name)
	if err := os.Rename(own.Name(), out); err != nil {
		os.Remove(own.Name())
		return "", err
	}
	return out, nil
}

// GoBuild builds the Go package pkg into the executable out.
func GoBuild(t testing.TB, pkg, out string) {
	t.Helper()
	if err := goBuild(pkg, out); err != nil {
		t.Fatal(err)
	}
}

func goBuild(pkg, out string) error {
	build := exec.Command("go", "build", "-o", out, pkg)
	build.Env = append(os.Environ(), "HOME="+buildHome)
	if output, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, output)
	}
	return nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Record is what a node's supervisor reports once the node is up (its ready file).
type Record struct {
	NodeID        string `json:"node_id"`
	IsHead        bool   `json:"is_head"`
	GCSAddress    string `json:"gcs_address"`
	SupervisorPID int    `json:"supervisor_pid"`
	GCSPID        int    `json:"gcs_pid"`
	RayletPID     int    `json:"raylet_pid"`
	SessionDir    string `json:"session_dir"`
	LogDir        string `json:"log_dir"`
}

// Node is one `raygo start --block` process.
type Node struct {
	Record
	cmd    *exec.Cmd
	exited chan struct{}
}

// Cluster is a set of nodes sharing one GCS.
type Cluster struct {
	t          testing.TB
	Bin        string
	TempDir    string
	GCSAddress string
	Head       *Node
	Workers    []*Node
	// Env is added to the environment of every node started after it is set.
	Env []string
}

// StartHead starts a head node with `raygo start --head --block` on a free port; extra
// arguments go to start (e.g. "--store", "redis", ...). The node is stopped at cleanup.
func StartHead(t testing.TB, extra ...string) *Cluster {
	t.Helper()
	return StartHeadWithEnv(t, nil, extra...)
}

// StartHeadWithEnv is StartHead with extra environment variables for the head's
// processes (test hooks).
func StartHeadWithEnv(t testing.TB, env []string, extra ...string) *Cluster {
	t.Helper()
	return StartHeadOn(t, "127.0.0.1", env, extra...)
}

// StartHeadOn is StartHeadWithEnv with the head bound to nodeIP (--node-ip-address):
// an address of the test's own network namespace.
func StartHeadOn(t testing.TB, nodeIP string, env []string, extra ...string) *Cluster {
	t.Helper()
	c := &Cluster{t: t, Bin: Binary(t), TempDir: t.TempDir(), Env: env}
	port := FreePort(t)
	c.GCSAddress = net.JoinHostPort(nodeIP, strconv.Itoa(port))
	args := append([]string{"--head", "--port", strconv.Itoa(port), "--node-ip-address", nodeIP}, extra...)
	c.Head = c.startNode(NodeOptions{}, args)
	return c
}

// AddNode starts a worker node that joins the cluster.
func (c *Cluster) AddNode(extra ...string) *Node {
	c.t.Helper()
	return c.AddNodeWith(NodeOptions{}, extra...)
}

// NodeOptions say how a worker node is started.
type NodeOptions struct {
	// Prefix runs the node's command under another that execs it (e.g. nsenter into a
	// network namespace the test created), so its process id stays the node's.
	Prefix []string
	// GCSAddress is the address the node joins (e.g. a fault-injecting proxy's);
	// default the cluster's.
	GCSAddress string
}

// AddNodeWith starts a worker node as options say.
func (c *Cluster) AddNodeWith(options NodeOptions, extra ...string) *Node {
	c.t.Helper()
	address := options.GCSAddress
	if address == "" {
		address = c.GCSAddress
	}
	n := c.startNode(options, append([]string{"--address", address}, extra...))
	c.Workers = append(c.Workers, n)
	return n
}

func (c *Cluster) startNode(options NodeOptions, args []string) *Node {
	t := c.t
	t.Helper()
	ready := filepath.Join(c.TempDir, fmt.Sprintf("ready-%d.json", time.Now().UnixNano()))
	full := append([]string{"start", "--block", "--temp-dir", c.TempDir, "--ready-file", ready}, args...)
	command := append(append(append([]string{}, options.Prefix...), c.Bin), full...)
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Env = append(os.Environ(), c.Env...)
	logPath := ready + ".out"
	out, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	// If the test process dies, the node dies with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start node: %v", err)
	}
	n := &Node{cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = out.Close(); close(n.exited) }()
	t.Cleanup(func() { n.Stop() })
	deadline := time.Now().Add(60 * time.Second)
	for {
		if raw, err := os.ReadFile(ready); err == nil && json.Unmarshal(raw, &n.Record) == nil {
			return n
		}
		select {
		case <-n.exited:
			log, _ := os.ReadFile(logPath)
			t.Fatalf("raygo %s exited before the node was up:\n%s", strings.Join(full, " "), log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			t.Fatalf("raygo %s: node not up after 60 s:\n%s", strings.Join(full, " "), log)
		}
	}
}

// Stop sends SIGTERM to the node's supervisor and waits (SIGKILL after 15 s).
func (n *Node) Stop() {
	if n.cmd.Process == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(15 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.exited
	}
}

// Kill sends SIGKILL to the node's supervisor (its daemons get SIGKILL from the kernel).
func (n *Node) Kill() {
	_ = n.cmd.Process.Kill()
	<-n.exited
}

// ReadRecord re-reads the node's record (the supervisor rewrites it when it restarts
// the GCS).
func (n *Node) ReadRecord(t testing.TB) Record {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(n.SessionDir, "nodes", n.NodeID+".json"))
	if err != nil {
		t.Fatalf("read node record: %v", err)
	}
	var rec Record
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatalf("decode node record: %v", err)
	}
	return rec
}

// ProcessAlive reports whether pid exists and is not a zombie.
func ProcessAlive(pid int) bool { return proc.Alive(pid) }

// Dial connects to a raygo gRPC server; closed at cleanup.
func Dial(t testing.TB, addr string) *ClientConn {
	t.Helper()
	conn, err := rpcutil.Dial(addr, rpcutil.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &ClientConn{Nodes: pb.NewNodeInfoServiceClient(conn), KV: pb.NewInternalKVServiceClient(conn),
		Jobs: pb.NewJobInfoServiceClient(conn), NodeManager: pb.NewNodeManagerServiceClient(conn)}
}

// HeadToken is the cluster token a head started with RAYGO_AUTH_MODE=token and HOME=home
// saved in home's token file.
func HeadToken(t testing.TB, home string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(home, ".raygo", "auth_token"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(raw))
}

// DashboardAddress asks the GCS where the head serves its dashboard. Start heads with
// `--dashboard-port 0` (the head picks a free port) and read it here: a port chosen by
// the test and passed to the head can be taken by another test's process meanwhile, and
// a taken dashboard port is only a warning. token is the cluster token with auth on, ""
// otherwise.
func (c *Cluster) DashboardAddress(t testing.TB, token string) string {
	t.Helper()
	conn, err := rpcutil.Dial(c.GCSAddress, rpcutil.DialOptions{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := pb.NewNodeInfoServiceClient(conn).GetClusterInfo(ctx, &pb.GetClusterInfoRequest{})
	if err != nil {
		t.Fatalf("GetClusterInfo: %v", err)
	}
	if info.DashboardAddress == "" {
		t.Fatal("the head serves no dashboard")
	}
	return info.DashboardAddress
}

// ClientConn bundles the service clients of one connection.
type ClientConn struct {
	Nodes       pb.NodeInfoServiceClient
	KV          pb.InternalKVServiceClient
	Jobs        pb.JobInfoServiceClient
	NodeManager pb.NodeManagerServiceClient
}

// Nodes returns the GCS node table, or an error while the GCS is unreachable.
func (c *Cluster) Nodes() ([]*pb.NodeInfo, error) {
	conn, err := rpcutil.Dial(c.GCSAddress, rpcutil.DialOptions{})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	reply, err := pb.NewNodeInfoServiceClient(conn).GetAllNodeInfo(ctx, &pb.GetAllNodeInfoRequest{})
	if err != nil {
		return nil, err
	}
	return reply.Nodes, nil
}

// Run runs the raygo binary with args and returns stdout, stderr and the exit code.
func (c *Cluster) Run(args ...string) (string, string, int) {
	return Run(c.t, c.Bin, append([]string{}, args...), "RAYGO_ADDRESS="+c.GCSAddress, "RAYGO_TEMP_DIR="+c.TempDir)
}

// CheckInvariants fails the test unless `raygo debug check-invariants` finds nothing
// (over two views 200 ms apart): no partial gang, no double allocation, no leak, every
// queue within its quota. step says what the cluster has just done.
func (c *Cluster) CheckInvariants(step string) {
	c.t.Helper()
	stdout, stderr, code := c.Run("debug", "check-invariants", "--views", "2", "--interval", "200ms")
	if code != 0 {
		c.t.Fatalf("after %s: check-invariants exit %d: %s%s", step, code, stdout, stderr)
	}
}

// Run runs bin with args and extra environment; it returns stdout, stderr and the exit
// code (the command is killed after 60 s).
func Run(t testing.TB, bin string, args []string, env ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		exitErr, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("run %s %v: %v", bin, args, err)
		}
		code = exitErr.ExitCode()
	}
	return stdout.String(), stderr.String(), code
}

// Eventually polls check every 100 ms until it returns nil; it fails the test with the
// last error when timeout passes. It returns how long it took.
func Eventually(t testing.TB, timeout time.Duration, what string, check func() error) time.Duration {
	t.Helper()
	return poll.Until(t, timeout, 100*time.Millisecond, what, check)
}

// FindNode returns the node with the given id from a node list.
func FindNode(nodes []*pb.NodeInfo, id string) *pb.NodeInfo {
	for _, n := range nodes {
		if n.NodeId == id {
			return n
		}
	}
	return nil
}

// DialPlacementGroups returns a placement-group client of the GCS at addr.
func DialPlacementGroups(t testing.TB, addr string) pb.PlacementGroupServiceClient {
	t.Helper()
	conn, err := rpcutil.Dial(addr, rpcutil.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return pb.NewPlacementGroupServiceClient(conn)
}

// PrepareOrphan makes the raylet at rayletAddress hold one prepared CPU bundle of a group
// the GCS at gcsAddress never recorded, with that GCS's epoch: what a GCS that died before
// persisting PREPARED leaves behind. It speaks as that GCS, which only a cluster without
// auth lets a test do: with auth on, a raylet takes a prepare from the GCS's own credential
// alone.
func PrepareOrphan(t testing.TB, ctx context.Context, gcsAddress, rayletAddress, groupID string) {
	t.Helper()
	info, err := Dial(t, gcsAddress).Nodes.GetClusterInfo(ctx, &pb.GetClusterInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	epoch := info.GcsEpoch
	conn, err := rpcutil.Dial(rayletAddress, rpcutil.DialOptions{Epoch: func() int64 { return epoch }})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := pb.NewNodeManagerServiceClient(conn).PrepareBundleResources(ctx, &pb.PrepareBundleResourcesRequest{Bundles: []*pb.BundleReservation{{
		Key: &pb.BundleKey{PlacementGroupId: groupID, BundleIndex: 0, Generation: 1}, Resources: map[string]float64{"CPU": 1},
	}}}); err != nil {
		t.Fatal(err)
	}
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/raygo-dev/raygo/gcs"
	"github.com/raygo-dev/raygo/internal/logging"
	"github.com/raygo-dev/raygo/internal/pprofserve"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

const startDescription = `Start a raygo node on this machine.

With --head: the GCS (on --port, default 6380) and the head node's raylet.
With --address HOST:PORT: a raylet that joins the cluster whose GCS is there.

With --block the node's daemons live and die with this foreground process (even
SIGKILL of it leaves nothing running). Without it, start runs them in the
background, prints the session directory (pid and log files) and returns once the
node is registered; 'raygo stop' stops them.

Auth (RAYGO_AUTH_MODE=token|disabled; unset: on unless --node-ip-address is loopback):
when on, every call to the node needs the cluster token (RAYGO_AUTH_TOKEN, else the file
at RAYGO_AUTH_TOKEN_PATH, else ~/.raygo/auth_token). A head without one generates it
and saves it to that file (mode 600); 'raygo get-auth-token' prints it. A worker node
may run on a node token instead (raygo auth issue --scope node): it registers with it,
gets the gossip key and the cluster token's SHA-256 from the GCS, and serves the GCS and
drivers, which carry the cluster token, without holding it.`

const startExamples = `  raygo start --head --block
  raygo start --head --store redis --redis-address 127.0.0.1:6379
  raygo start --address 127.0.0.1:6380 --num-cpus 8 --labels zone=a,market=spot
  raygo start --head --resources '{"accelerator_x": 2}' --node-name head-0
  raygo start --head --autoscaling-config examples/autoscaler/local.yaml
  RAYGO_AUTH_MODE=token raygo start --head
`

// startOptions are the parsed flags of `raygo start`.
type startOptions struct {
	head      bool
	address   string
	port      int
	nodeIP    string
	nodeName  string
	block     bool
	store     storeFlags
	resources nodeResourceFlags
	logLevel  string
	// gcsPprof and rayletPprof: --pprof of the node's daemons.
	gcsPprof, rayletPprof string
	jobLease              time.Duration
	nodeTimeout           time.Duration
	dashboardHost         string
	dashboardPort         int
	metricsPort           int
	// queuesFile: --queues, the queue configuration (head only).
	queuesFile string
	// autoscalingConfig: --autoscaling-config, the cluster YAML the head's autoscaler
	// scales for ("" for no autoscaler).
	autoscalingConfig string
	tempDir           string
	sessionDir        string // set when start re-runs itself in the background
	readyFile         string // ditto: where the background supervisor reports readiness

	// resolved
	gcsAddress     string
	resourceValues map[string]float64
	labelValues    map[string]string
}

func runStart(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("start", startDescription, startExamples, stdout)
	var o startOptions
	fs.BoolVar(&o.head, "head", false, "start the head node: the GCS and a raylet")
	fs.StringVar(&o.address, "address", "", "GCS HOST:PORT to join (default: RAYGO_ADDRESS, else "+defaultAddress+"); not with --head")
	fs.IntVar(&o.port, "port", gcs.DefaultPort, "GCS port, with --head")
	fs.StringVar(&o.nodeIP, "node-ip-address", "127.0.0.1", "address this node binds to and advertises")
	fs.StringVar(&o.nodeName, "node-name", "", "node name (default: the node IP)")
	fs.BoolVar(&o.block, "block", false, "stay in the foreground; the node's daemons die with this process")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: "+logging.Levels)
	fs.StringVar(&o.gcsPprof, "gcs-pprof", "", "with --head: serve the GCS's Go profiler (/debug/pprof/) on this loopback HOST:PORT (default: off)")
	fs.StringVar(&o.rayletPprof, "raylet-pprof", "", "serve the raylet's Go profiler (/debug/pprof/) on this loopback HOST:PORT (default: off)")
	fs.StringVar(&o.queuesFile, "queues", "", "with --head: queue configuration (YAML with Kueue's field names: queues with quotas, cohorts, priority classes); placement groups are admitted into their queue's quota before they are placed (default: none)")
	fs.StringVar(&o.autoscalingConfig, "autoscaling-config", "", "with --head: run the autoscaler for this Ray cluster YAML (its node types, limits and provider: fake_multinode or aws), as Ray's flag; 'raygo up' passes it; with auth on, the autoscaler and the nodes it launches run on a node-scoped token the head issues (default: no autoscaler)")
	fs.DurationVar(&o.jobLease, "job-lease-timeout", 30*time.Second, "with --head: a driver that does not renew its job lease for this long is dead and its non-detached placement groups are removed")
	fs.StringVar(&o.dashboardHost, "dashboard-host", "127.0.0.1", "with --head: address the dashboard port (/metrics) binds to")
	fs.IntVar(&o.dashboardPort, "dashboard-port", 8265, "with --head: dashboard port, serving the dashboard, Ray's state API (/api/v0/...) and /metrics (0: a free one, -1: none); one already taken is a warning")
	fs.IntVar(&o.metricsPort, "metrics-export-port", -1, "the raylet's /metrics port on --node-ip-address, as Ray's flag (0: a free one; -1, the default: none)")
	fs.DurationVar(&o.nodeTimeout, "node-timeout", 30*time.Second, "with --head: a node that sends no heartbeat for this long is DEAD (raylets send one every 5 s at least); 0 turns the check off")
	fs.StringVar(&o.tempDir, "temp-dir", "", "root of session directories (default: RAYGO_TEMP_DIR, else "+defaultTempDir+")")
	fs.StringVar(&o.sessionDir, "session-dir", "", "internal: session directory to use")
	fs.StringVar(&o.readyFile, "ready-file", "", "internal: file to write when the node is up")
	o.store.register(fs)
	o.resources.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return badInput("start: unexpected argument %q (see --help)", fs.Arg(0))
	}
	if net.ParseIP(o.nodeIP) == nil {
		return badInput("--node-ip-address %q: not an IP address", o.nodeIP)
	}
	// Before validate, which asks the GCS of a joined cluster who it is.
	if err := resolveAuth(o.nodeIP, o.head, o.sessionDir == "", stderr); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	if !o.block {
		return startInBackground(o, args, stdout)
	}
	return superviseNode(o, stdout, stderr)
}

// validate checks every flag and what can be checked before starting anything: the GCS
// port is free (head), Redis answers (head with --store redis), a GCS answers (worker).
func (o *startOptions) validate() error {
	if net.ParseIP(o.nodeIP) == nil {
		return badInput("--node-ip-address %q: not an IP address", o.nodeIP)
	}
	if _, err := logging.ParseLevel(o.logLevel); err != nil {
		return badInput("%v", err)
	}
	for flag, addr := range map[string]string{"--gcs-pprof": o.gcsPprof, "--raylet-pprof": o.rayletPprof} {
		if addr != "" {
			if err := pprofserve.CheckAddress(flag, addr); err != nil {
				return badInput("%v", err)
			}
		}
	}
	if o.gcsPprof != "" && !o.head {
		return badInput("--gcs-pprof: only a head node runs the GCS")
	}
	if o.queuesFile != "" {
		if !o.head {
			return badInput("--queues: only a head node runs the GCS")
		}
		abs, err := filepath.Abs(o.queuesFile)
		if err != nil {
			return badInput("--queues: %v", err)
		}
		o.queuesFile = abs
		if _, err := loadQueues(o.queuesFile); err != nil {
			return err
		}
	}
	if o.autoscalingConfig != "" {
		if !o.head {
			return badInput("--autoscaling-config: only a head node runs the autoscaler")
		}
		abs, err := filepath.Abs(o.autoscalingConfig)
		if err != nil {
			return badInput("--autoscaling-config: %v", err)
		}
		o.autoscalingConfig = abs
		if _, err := loadClusterConfig("--autoscaling-config", abs); err != nil {
			return err
		}
	}
	var err error
	if o.resourceValues, o.labelValues, err = o.resources.resolve(); err != nil {
		return err
	}
	if err := o.store.validate(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if o.jobLease <= 0 {
		return badInput("--job-lease-timeout %s: must be positive", o.jobLease)
	}
	if o.metricsPort < -1 || o.metricsPort > 65535 {
		return badInput("--metrics-export-port %d: must be from 0 to 65535, or -1 for none", o.metricsPort)
	}
	if o.nodeTimeout < 0 {
		return badInput("--node-timeout %s: must not be negative", o.nodeTimeout)
	}
	if o.head {
		if o.address != "" {
			return badInput("--address: a head node starts its own GCS; give --port instead")
		}
		if o.port < 1 || o.port > 65535 {
			return badInput("--port %d: must be from 1 to 65535", o.port)
		}
		o.gcsAddress = net.JoinHostPort(o.nodeIP, strconv.Itoa(o.port))
		if o.sessionDir == "" { // the background re-run checked already
			l, err := net.Listen("tcp", o.gcsAddress)
			if err != nil {
				return badInput("--port %d: %s is in use (is a head node running? 'raygo stop' stops it)", o.port, o.gcsAddress)
			}
			_ = l.Close()
		}
		st, err := o.store.open(ctx)
		if err != nil {
			return err
		}
		return st.Close()
	}
	if o.gcsAddress, err = resolveAddress(o.address); err != nil {
		return err
	}
	if _, err := fetchClusterInfo(ctx, o.gcsAddress); err != nil {
		return badInput("--address %s: no GCS answers: %v", o.gcsAddress, err)
	}
	return nil
}

// fetchClusterInfo asks the GCS at addr who it is.
func fetchClusterInfo(ctx context.Context, addr string) (*pb.GetClusterInfoReply, error) {
	conn, err := rpcutil.Dial(addr, rpcutil.DialOptions{})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return pb.NewNodeInfoServiceClient(conn).GetClusterInfo(ctx, &pb.GetClusterInfoRequest{})
}

// startInBackground re-runs `start` with --block as a detached process and returns once
// it reports the node up (or prints why it failed).
func startInBackground(o startOptions, args []string, stdout io.Writer) error {
	sessionDir, err := newSessionDir(tempDir(o.tempDir))
	if err != nil {
		return err
	}
	readyFile := filepath.Join(sessionDir, "ready-"+strconv.Itoa(os.Getpid())+".json")
	outPath := filepath.Join(sessionDir, "logs", "supervisor-"+strconv.Itoa(os.Getpid())+".out")
	out, err := os.Create(outPath)
	if err != nil {
		return fmt.Errorf("create %s: %w", outPath, err)
	}
	defer out.Close()
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the raygo executable: %w", err)
	}
	childArgs := append([]string{"start"}, argsWithout(args, "block", "session-dir", "ready-file")...)
	childArgs = append(childArgs, "--block", "--session-dir", sessionDir, "--ready-file", readyFile)
	cmd := exec.Command(self, childArgs...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start background node: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case <-exited:
			tail, _ := os.ReadFile(outPath)
			return fmt.Errorf("the node did not start (log %s): %s", outPath, lastLines(string(tail), 5))
		case <-deadline:
			_ = cmd.Process.Kill()
			return fmt.Errorf("the node did not come up within 60 s (log %s)", outPath)
		case <-time.After(100 * time.Millisecond):
		}
		raw, err := os.ReadFile(readyFile)
		if err != nil {
			continue
		}
		var rec nodeRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			continue
		}
		_ = os.Remove(readyFile)
		printStarted(stdout, rec)
		fmt.Fprintf(stdout, "To stop this machine's nodes:  raygo stop\n")
		return nil
	}
}

func printStarted(w io.Writer, rec nodeRecord) {
	kind := "Node"
	if rec.IsHead {
		kind = "Head node"
	}
	fmt.Fprintf(w, "%s started: node_id %s\n", kind, rec.NodeID)
	fmt.Fprintf(w, "  GCS address:        %s\n", rec.GCSAddress)
	fmt.Fprintf(w, "  Session directory:  %s (logs in %s)\n", rec.SessionDir, rec.LogDir)
	if rec.IsHead {
		fmt.Fprintf(w, "To add a node:      raygo start --address %s\n", rec.GCSAddress)
		fmt.Fprintf(w, "To see the cluster: RAYGO_ADDRESS=%s raygo status\n", rec.GCSAddress)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/raygo-dev/raygo/autoscaler/clusterconfig"
	"github.com/raygo-dev/raygo/autoscaler/provider"
	"github.com/raygo-dev/raygo/autoscaler/provider/aws"
	"github.com/raygo-dev/raygo/autoscaler/provider/fakemultinode"
	"github.com/raygo-dev/raygo/autoscaler/reconciler"
	"github.com/raygo-dev/raygo/gcs"
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// loadClusterConfig reads a cluster YAML for the flag or argument named what. Every
// problem is one line of the usage error, with its field path.
func loadClusterConfig(what, path string) (*clusterconfig.Config, error) {
	cfg, err := clusterconfig.Load(path)
	if err != nil {
		var problems clusterconfig.Errors
		if errors.As(err, &problems) {
			lines := make([]string, len(problems))
			for i, p := range problems {
				lines[i] = path + ": " + p.Error()
			}
			return nil, &usageError{msg: lines[0], lines: lines}
		}
		return nil, badInput("%s %s: %v", what, path, err)
	}
	switch cfg.Provider.Type {
	case provider.FakeMultinode, provider.AWS:
	default:
		return nil, badInput("%s: provider.type: %q: this raygo launches nodes with %q (local raylet processes) or %q (EC2)", path, cfg.Provider.Type, provider.FakeMultinode, provider.AWS)
	}
	return cfg, nil
}

// newProvider builds the cluster's provider: new nodes join gcsAddress; fake_multinode
// keeps its state under temp.
func newProvider(ctx context.Context, cfg *clusterconfig.Config, gcsAddress, temp string, log zerolog.Logger) (provider.Provider, error) {
	if cfg.Provider.Type == provider.AWS {
		nodeToken, err := launchedNodeToken(ctx, gcsAddress, log)
		if err != nil {
			return nil, err
		}
		return newAWSProvider(ctx, cfg, gcsAddress, nodeToken)
	}
	return fakemultinode.New(fakemultinode.Config{
		Dir: clusterStateDir(temp, cfg.ClusterName), GCSAddress: gcsAddress, TempDir: tempDir(temp),
		Commands: func(nodeType string) ([]string, []string) { return cfg.NodeCommands(nodeType, false) },
	})
}

func newAWSProvider(ctx context.Context, cfg *clusterconfig.Config, gcsAddress, nodeToken string) (*aws.Provider, error) {
	nodeConfigs := map[string]map[string]any{}
	for _, t := range cfg.WorkerTypes() {
		nodeConfigs[t.Name] = cfg.NodeTypes[t.Name].NodeConfig
	}
	return aws.New(ctx, aws.Config{
		ClusterName: cfg.ClusterName, Region: cfg.Provider.Region, GCSAddress: gcsAddress, NodeConfigs: nodeConfigs, NodeToken: nodeToken,
		Commands: func(nodeType string) ([]string, []string) { return cfg.NodeCommands(nodeType, false) },
	})
}

// clusterStateDir is where the autoscaler of the cluster named name keeps its provider's
// state: `raygo down` finds the cluster's instances there.
func clusterStateDir(temp, name string) string {
	return filepath.Join(tempDir(temp), "clusters", name)
}

const autoscalerDescription = `Run the autoscaler in the foreground until SIGTERM: every --tick it reads the
cluster's nodes and pending demand from the GCS, plans what to launch and terminate
for the node types of the cluster YAML, and does it through the YAML's provider
(fake_multinode: each node is a 'raygo start' raylet process on this machine, after
the YAML's initialization and setup commands for its type, in its log; aws:
each node is an EC2 instance whose user data runs 'raygo start' joining this GCS).
'raygo start --head --autoscaling-config FILE' and 'raygo up FILE' run it for you.
With auth on, a node-scoped token is all it needs (raygo auth issue --scope node),
found as every command finds its token; the nodes it launches join with it
(fake_multinode's inherit its environment; the AWS user data writes it to
/etc/raygo/node_token, and never an admin token: user data is readable by whoever may
describe the instance). The head gives its autoscaler one in RAYGO_AUTH_TOKEN_PATH.`

func runAutoscaler(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("autoscaler", autoscalerDescription, "  raygo autoscaler --address 127.0.0.1:6380 --autoscaling-config cluster.yaml\n", stdout)
	var lf logFlags
	lf.register(fs)
	address := addressFlag(fs)
	configPath := fs.String("autoscaling-config", "", "the cluster YAML (Ray's format; required)")
	tick := fs.Duration("tick", time.Second, "time between two reconcile rounds (Ray's is 5 s)")
	temp := fs.String("temp-dir", "", "root of session directories; the provider's state goes to <temp>/clusters/<cluster_name> (default: RAYGO_TEMP_DIR, else "+defaultTempDir+")")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *configPath == "" {
		return badInput("--autoscaling-config: required")
	}
	if *tick <= 0 {
		return badInput("--tick %s: must be positive", *tick)
	}
	cfg, err := loadClusterConfig("--autoscaling-config", *configPath)
	if err != nil {
		return err
	}
	gcsAddress, err := resolveAddress(*address)
	if err != nil {
		return err
	}
	log, closeLog, err := lf.logger("autoscaler", stderr)
	if err != nil {
		return err
	}
	defer closeLog()
	for _, key := range cfg.Ignored {
		log.Warn().Str("field", key).Msg("set in the cluster YAML but not used by raygo; ignored")
	}
	if cfg.Provider.Type == provider.AWS {
		for _, t := range cfg.WorkerTypes() {
			for _, key := range aws.IgnoredKeys(cfg.NodeTypes[t.Name].NodeConfig) {
				log.Warn().Str("field", "available_node_types."+t.Name+".node_config."+key).Msg("not a RunInstances parameter raygo passes; ignored")
			}
		}
	}
	ctx, cancel := signalContext()
	defer cancel()
	p, err := newProvider(ctx, cfg, gcsAddress, *temp, log)
	if err != nil {
		return err
	}
	conn, err := rpcutil.Dial(gcsAddress, rpcutil.DialOptions{})
	if err != nil {
		return err
	}
	defer conn.Close()
	nodeConfigs := map[string]map[string]any{}
	for name, t := range cfg.NodeTypes {
		nodeConfigs[name] = t.NodeConfig
	}
	expectedLaunch := map[string]time.Duration{}
	for name, settings := range cfg.Provider.Raygo.NodeTypes {
		expectedLaunch[name] = settings.ExpectedLaunch
	}
	r := reconciler.New(reconciler.Config{
		Types: cfg.WorkerTypes(), NodeConfigs: nodeConfigs, MaxWorkers: cfg.MaxWorkers, UpscalingSpeed: cfg.UpscalingSpeed,
		MaxUnavailable: cfg.Provider.Raygo.MaxUnavailable.Resolve, ExpectedLaunch: expectedLaunch, Tick: *tick, Log: log,
	}, reconciler.NewGCS(conn), p)
	log.Info().Str("cluster", cfg.ClusterName).Str("gcs", gcsAddress).Dur("tick", *tick).Msg("autoscaler running")
	return r.Run(ctx)
}

const upDescription = `Start a cluster from a Ray cluster YAML: the head node (its type's resources),
with the autoscaler in it, which launches min_workers of every node type at once and
more nodes for pending work, and terminates idle ones. Waits until every type has its
min_workers. The YAML must pass Ray's schema; raygo's own settings live under
provider.raygo. Each problem of a bad YAML is one line with its field path, exit
status 2, and nothing starts. For a fake_multinode cluster the head's
initialization_commands, setup_commands and head_setup_commands run on this machine
first, echoed; a failing one stops up with nothing started.`

func runUp(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("up", upDescription, "  raygo up examples/autoscaler/local.yaml --yes\n", stdout)
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	port := fs.Int("port", gcs.DefaultPort, "GCS port of the head")
	nodeIP := fs.String("node-ip-address", "127.0.0.1", "address the head binds to and advertises: the GCS address new nodes join")
	wait := fs.Duration("timeout", 10*time.Minute, "how long to wait for min_workers (0: do not wait)")
	temp := fs.String("temp-dir", "", "root of session directories (default: RAYGO_TEMP_DIR, else "+defaultTempDir+")")
	files, err := parseFlagsAnywhere(fs, args)
	if err != nil {
		return err
	}
	if len(files) != 1 {
		return badInput("up: give one cluster YAML (see --help)")
	}
	path, err := filepath.Abs(files[0])
	if err != nil {
		return badInput("%s: %v", files[0], err)
	}
	cfg, err := loadClusterConfig("up", path)
	if err != nil {
		return err
	}
	for _, key := range cfg.Ignored {
		fmt.Fprintf(stderr, "raygo: %s: %s is set but raygo does not use it; ignored\n", path, key)
	}
	if !*yes && !confirm(os.Stdin, stdout, fmt.Sprintf("Start cluster %q (head type %s)?", cfg.ClusterName, cfg.HeadNodeType)) {
		return badInput("up: not confirmed (pass --yes to skip the question)")
	}
	if err := runHeadSetup(cfg, stdout, stderr); err != nil {
		return err
	}
	head := cfg.HeadType()
	startArgs := []string{"--head", "--port", strconv.Itoa(*port), "--node-ip-address", *nodeIP, "--autoscaling-config", path}
	if *temp != "" {
		startArgs = append(startArgs, "--temp-dir", *temp)
	}
	nodeArgs, err := provider.NodeArgs(head.Resources.ToFloat(), head.GPUModel, head.Labels)
	if err != nil {
		return err
	}
	if err := runStart(append(startArgs, nodeArgs...), stdout, stderr); err != nil {
		return err
	}
	if *wait == 0 {
		return nil
	}
	return waitForMinWorkers(cfg, net.JoinHostPort(*nodeIP, strconv.Itoa(*port)), *wait, stdout)
}

// runHeadSetup runs, for a fake_multinode cluster, the head's initialization commands
// and setup_commands + head_setup_commands on this machine (the head's) before the head
// starts, as the provider does for its nodes; their output goes to up's. A failing
// command is an error: nothing starts. The aws provider's head is this machine too, not
// one it set up: its commands are not run here.
func runHeadSetup(cfg *clusterconfig.Config, stdout, stderr io.Writer) error {
	if cfg.Provider.Type != provider.FakeMultinode {
		return nil
	}
	script := fakemultinode.SetupScript(cfg.NodeCommands(cfg.HeadNodeType, true))
	if script == "" {
		return nil
	}
	cmd := exec.Command(fakemultinode.Shell, "-c", script)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("up: the head's setup commands: %w; the cluster is not started", err)
	}
	return nil
}

// confirm asks question on out and reads y or yes from in.
func confirm(in io.Reader, out io.Writer, question string) bool {
	fmt.Fprintf(out, "%s [y/N]: ", question)
	line, _ := bufio.NewReader(in).ReadString('\n')
	answer := strings.ToLower(strings.TrimSpace(line))
	return answer == "y" || answer == "yes"
}

// waitForMinWorkers polls the GCS until every node type runs its min_workers, printing
// progress when it changes.
func waitForMinWorkers(cfg *clusterconfig.Config, gcsAddress string, timeout time.Duration, stdout io.Writer) error {
	want := map[string]int{}
	for name, t := range cfg.NodeTypes {
		if t.MinWorkers > 0 {
			want[name] = t.MinWorkers
		}
	}
	if len(want) == 0 {
		fmt.Fprintln(stdout, "No node type has min_workers; the autoscaler launches nodes for pending work.")
		return nil
	}
	conn, err := rpcutil.Dial(gcsAddress, rpcutil.DialOptions{})
	if err != nil {
		return err
	}
	defer conn.Close()
	client := pb.NewNodeInfoServiceClient(conn)
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		reply, err := client.GetAllNodeInfo(ctx, &pb.GetAllNodeInfoRequest{AliveOnly: true})
		cancel()
		if err == nil {
			have := map[string]int{}
			for _, n := range reply.Nodes {
				if n.Labels[nodelabel.InstanceID] != "" {
					have[n.Labels[nodelabel.NodeType]]++
				}
			}
			var parts []string
			done := true
			for _, name := range slices.Sorted(maps.Keys(want)) {
				parts = append(parts, fmt.Sprintf("%s %d/%d", name, min(have[name], want[name]), want[name]))
				done = done && have[name] >= want[name]
			}
			if progress := strings.Join(parts, ", "); progress != last {
				fmt.Fprintf(stdout, "min_workers up: %s\n", progress)
				last = progress
			}
			if done {
				fmt.Fprintf(stdout, "Cluster %q is up. See it: RAYGO_ADDRESS=%s raygo status; stop it: raygo down <yaml>\n", cfg.ClusterName, gcsAddress)
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("min_workers not up within %s (the cluster keeps trying; 'raygo status' shows failures, 'raygo down' stops it)", timeout)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

const downDescription = `Stop a cluster 'raygo up' started: the head node (and so its autoscaler) first,
then every node the cluster's autoscaler launched, waiting until each is gone (aws:
every EC2 instance tagged with the cluster's name, until EC2 reports it terminated).`

func runDown(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("down", downDescription, "  raygo down examples/autoscaler/local.yaml --yes\n", stdout)
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	port := fs.Int("port", gcs.DefaultPort, "GCS port of the head")
	nodeIP := fs.String("node-ip-address", "127.0.0.1", "the head's address, as given to 'raygo up'")
	grace := fs.Duration("grace", 15*time.Second, "how long each node has to stop before SIGKILL (aws: how long to wait for EC2 to terminate the instances, plus 5 min)")
	temp := fs.String("temp-dir", "", "root of session directories (default: RAYGO_TEMP_DIR, else "+defaultTempDir+")")
	files, err := parseFlagsAnywhere(fs, args)
	if err != nil {
		return err
	}
	if len(files) != 1 {
		return badInput("down: give one cluster YAML (see --help)")
	}
	cfg, err := loadClusterConfig("down", files[0])
	if err != nil {
		return err
	}
	if !*yes && !confirm(os.Stdin, stdout, fmt.Sprintf("Terminate every node of cluster %q?", cfg.ClusterName)) {
		return badInput("down: not confirmed (pass --yes to skip the question)")
	}
	// The head first: its autoscaler would launch min_workers again.
	records, err := runningNodeRecords(tempDir(*temp))
	if err != nil {
		return err
	}
	headAddress := net.JoinHostPort(*nodeIP, strconv.Itoa(*port))
	for _, rec := range records {
		if rec.IsHead && rec.GCSAddress == headAddress {
			stopSupervisor(rec, syscall.SIGTERM, *grace, stderr)
			fmt.Fprintf(stdout, "Stopped the head node %s (pid %d)\n", shortID(rec.NodeID), rec.SupervisorPID)
		}
	}
	var n int
	if cfg.Provider.Type == provider.AWS {
		n, err = terminateAWSInstances(cfg, headAddress, *grace+5*time.Minute)
	} else {
		n, err = terminateClusterInstances(clusterStateDir(*temp, cfg.ClusterName), *grace)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Terminated %d node(s) of cluster %q.\n", n, cfg.ClusterName)
	return nil
}

// anyInstance reports whether any cluster directory lists a running instance.
func anyInstance(dirs []string) bool {
	for _, dir := range dirs {
		if p, err := fakemultinode.New(fakemultinode.Config{Dir: dir}); err == nil {
			if instances, err := p.Instances(context.Background()); err == nil && len(instances) > 0 {
				return true
			}
		}
	}
	return false
}

// terminateClusterInstances terminates every instance the fake_multinode provider of
// the cluster directory dir lists and waits until each is gone (grace, then SIGKILL).
func terminateClusterInstances(dir string, grace time.Duration) (int, error) {
	p, err := fakemultinode.New(fakemultinode.Config{Dir: dir, TerminateGrace: grace})
	if err != nil {
		return 0, err
	}
	ctx := context.Background()
	instances, err := p.Instances(ctx)
	if err != nil || len(instances) == 0 {
		return 0, err
	}
	ids := make([]string, len(instances))
	for i, inst := range instances {
		ids[i] = inst.ID
	}
	if err := p.Terminate(ctx, ids); err != nil {
		return 0, err
	}
	deadline := time.Now().Add(grace + 5*time.Second)
	for {
		left, err := p.Instances(ctx)
		if err != nil {
			return 0, err
		}
		if len(left) == 0 {
			return len(ids), nil
		}
		if time.Now().After(deadline) {
			return len(ids) - len(left), fmt.Errorf("%d node(s) still running after %s", len(left), grace+5*time.Second)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// terminateAWSInstances terminates every pending or running instance tagged with the
// cluster's name and waits until EC2 reports each terminated, for at most timeout.
func terminateAWSInstances(cfg *clusterconfig.Config, headAddress string, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	p, err := newAWSProvider(ctx, cfg, headAddress, "") // terminates only: launches nothing
	if err != nil {
		return 0, err
	}
	instances, err := p.Instances(ctx)
	if err != nil || len(instances) == 0 {
		return 0, err
	}
	ids := make([]string, len(instances))
	for i, inst := range instances {
		ids[i] = inst.ID
	}
	if err := p.Terminate(ctx, ids); err != nil {
		return 0, err
	}
	if err := p.WaitTerminated(ctx, ids, timeout); err != nil {
		return 0, err
	}
	return len(ids), nil
}

// stopSupervisor stops a node's supervisor: signal (SIGTERM, or SIGKILL at once), then
// SIGKILL after grace.
func stopSupervisor(rec nodeRecord, signal syscall.Signal, grace time.Duration, stderr io.Writer) {
	_ = syscall.Kill(rec.SupervisorPID, signal)
	deadline := time.Now().Add(grace)
	for isRaygoProcess(rec.SupervisorPID) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if isRaygoProcess(rec.SupervisorPID) {
		fmt.Fprintf(stderr, "node %s did not stop within %s; killing it\n", shortID(rec.NodeID), grace)
		_ = syscall.Kill(rec.SupervisorPID, syscall.SIGKILL)
	}
}

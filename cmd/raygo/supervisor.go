package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/raygo-dev/raygo/internal/logging"
	"github.com/raygo-dev/raygo/internal/rpcutil"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/raylet"
)

// daemon is one child process of a node's supervisor.
type daemon struct {
	name   string
	args   []string
	cmd    *exec.Cmd
	exited chan error
}

// supervisor runs a node's daemons (the GCS and the raylet on the head; a raylet
// elsewhere) as children that get SIGKILL when the supervisor dies. It restarts a GCS
// that dies (with the Redis store nothing is lost) and stops when its raylet dies.
type supervisor struct {
	opts       startOptions
	log        zerolog.Logger
	self       string
	sessionDir string
	logDir     string
	nodeID     string
	record     nodeRecord
	gcs        *daemon
	raylet     *daemon
	// autoscaler runs on a head started with --autoscaling-config.
	autoscaler *daemon
	// gcsUp is when the GCS last answered after a start.
	gcsUp time.Time
}

// gcsStable is how long a GCS must have served before it exited for its restart to come
// after the shortest wait again: a GCS that crashes right after every start is restarted
// ever more slowly (up to 10 s apart), one that ran fine and was killed comes back at once.
const gcsStable = 10 * time.Second

func superviseNode(o startOptions, stdout, stderr io.Writer) error {
	level, _ := logging.ParseLevel(o.logLevel)
	s := &supervisor{opts: o, log: logging.New(stderr, level, "supervisor"), nodeID: raylet.NewNodeID()}
	var err error
	if s.self, err = os.Executable(); err != nil {
		return fmt.Errorf("find the raygo executable: %w", err)
	}
	s.sessionDir = o.sessionDir
	if s.sessionDir == "" {
		if s.sessionDir, err = newSessionDir(tempDir(o.tempDir)); err != nil {
			return err
		}
	}
	s.logDir = filepath.Join(s.sessionDir, "logs")
	ctx, cancel := signalContext()
	defer cancel()
	defer s.stopAll()

	if o.head {
		if err := s.startGCS(ctx); err != nil {
			return err
		}
	}
	if err := s.startRaylet(ctx); err != nil {
		return err
	}
	if o.autoscalingConfig != "" {
		if err := s.startAutoscaler(ctx); err != nil {
			return err
		}
	}
	s.record = nodeRecord{
		NodeID: s.nodeID, IsHead: o.head, GCSAddress: o.gcsAddress, SupervisorPID: os.Getpid(),
		RayletPID: s.raylet.cmd.Process.Pid, SessionDir: s.sessionDir, LogDir: s.logDir,
		Autoscaler: s.autoscaler != nil,
	}
	if s.gcs != nil {
		s.record.GCSPID = s.gcs.cmd.Process.Pid
	}
	if err := s.writeRecord(); err != nil {
		return err
	}
	defer os.Remove(s.recordPath())
	if o.readyFile != "" {
		if err := writeJSONFile(o.readyFile, s.record); err != nil {
			return fmt.Errorf("write %s: %w", o.readyFile, err)
		}
	} else {
		printStarted(stdout, s.record)
		fmt.Fprintf(stdout, "Running in the foreground; Ctrl-C stops this node.\n")
	}
	return s.watch(ctx)
}

func (s *supervisor) recordPath() string {
	return filepath.Join(s.sessionDir, "nodes", s.nodeID+".json")
}

func (s *supervisor) writeRecord() error {
	if err := writeJSONFile(s.recordPath(), s.record); err != nil {
		return fmt.Errorf("write node record: %w", err)
	}
	return nil
}

// watch waits for a signal or a daemon's exit.
func (s *supervisor) watch(ctx context.Context) error {
	restarts := rpcutil.Backoff{Min: 500 * time.Millisecond, Max: 10 * time.Second}
	for {
		var gcsExited, autoscalerExited chan error
		if s.gcs != nil {
			gcsExited = s.gcs.exited
		}
		if s.autoscaler != nil {
			autoscalerExited = s.autoscaler.exited
		}
		select {
		case <-ctx.Done():
			s.log.Info().Msg("stopping the node")
			return nil
		case err := <-s.raylet.exited:
			return fmt.Errorf("the raylet exited (%v); see %s", exitText(err), filepath.Join(s.logDir, "raylet.log"))
		case err := <-autoscalerExited:
			// The autoscaler keeps no state of its own (the provider and the GCS hold
			// it): a new one adopts the instances the old one launched.
			s.log.Warn().Str("exit", exitText(err)).Msg("the autoscaler exited; restarting it in 2 s")
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(2 * time.Second):
			}
			if err := s.startAutoscaler(ctx); err != nil {
				s.log.Error().Err(err).Msg("autoscaler restart failed; will retry")
				s.autoscaler.exited = make(chan error, 1)
				s.autoscaler.exited <- err
			}
		case err := <-gcsExited:
			if !s.gcsUp.IsZero() && time.Since(s.gcsUp) >= gcsStable {
				restarts.Reset()
			}
			wait := restarts.Next()
			s.log.Warn().Str("exit", exitText(err)).Dur("restart_in", wait).Msg("the GCS exited; restarting it")
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
			if err := s.startGCS(ctx); err != nil {
				s.log.Error().Err(err).Msg("GCS restart failed; will retry")
				s.gcs.exited = make(chan error, 1)
				s.gcs.exited <- err
				continue
			}
			s.record.GCSPID = s.gcs.cmd.Process.Pid
			if err := s.writeRecord(); err != nil {
				s.log.Error().Err(err).Msg("could not update the node record")
			}
		}
	}
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// spawn starts a daemon whose stdout and stderr go to <logs>/<name>.out; it gets SIGKILL
// when this process dies.
func (s *supervisor) spawn(name string, args []string) (*daemon, error) {
	return s.spawnWithEnv(name, nil, args)
}

// spawnWithEnv is spawn with env as the daemon's environment (nil: this process's).
func (s *supervisor) spawnWithEnv(name string, env, args []string) (*daemon, error) {
	out, err := os.OpenFile(filepath.Join(s.logDir, name+".out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s output: %w", name, err)
	}
	cmd := exec.Command(s.self, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	d := &daemon{name: name, args: args, cmd: cmd, exited: make(chan error, 1)}
	go func() {
		err := cmd.Wait()
		_ = out.Close()
		d.exited <- err
	}()
	return d, nil
}

func (s *supervisor) startGCS(ctx context.Context) error {
	o := s.opts
	args := append([]string{"gcs-server", "--node-ip-address", o.nodeIP, "--port", strconv.Itoa(o.port), "--job-lease-timeout", o.jobLease.String(),
		"--node-timeout", o.nodeTimeout.String(), "--dashboard-host", o.dashboardHost, "--dashboard-port", strconv.Itoa(o.dashboardPort), "--log-level", o.logLevel, "--log-file", filepath.Join(s.logDir, "gcs.log"), "--pprof", o.gcsPprof, "--queues", o.queuesFile,
		"--store-identity-file", filepath.Join(s.sessionDir, "redis-store-identity")}, o.store.args()...)
	d, err := s.spawn("gcs", args)
	if err != nil {
		return err
	}
	s.gcs = d
	err = waitUntil(ctx, 20*time.Second, d, func(ctx context.Context) error {
		_, err := fetchClusterInfo(ctx, o.gcsAddress)
		return err
	})
	if err != nil {
		return fmt.Errorf("the GCS did not start: %w (see %s)", err, filepath.Join(s.logDir, "gcs.log"))
	}
	s.gcsUp = time.Now()
	s.log.Info().Int("pid", d.cmd.Process.Pid).Str("address", o.gcsAddress).Msg("GCS up")
	return nil
}

// startAutoscaler runs the autoscaler for --autoscaling-config against this head's GCS
// (with auth on, on a node-scoped token: autoscalerEnv).
func (s *supervisor) startAutoscaler(ctx context.Context) error {
	o := s.opts
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	env, err := s.autoscalerEnv(ctx)
	if err != nil {
		return err
	}
	d, err := s.spawnWithEnv("autoscaler", env, []string{"autoscaler", "--address", o.gcsAddress, "--autoscaling-config", o.autoscalingConfig,
		"--temp-dir", tempDir(o.tempDir), "--log-level", o.logLevel, "--log-file", filepath.Join(s.logDir, "autoscaler.log")})
	if err != nil {
		return err
	}
	s.autoscaler = d
	s.log.Info().Int("pid", d.cmd.Process.Pid).Str("config", o.autoscalingConfig).Msg("autoscaler up")
	return nil
}

func (s *supervisor) startRaylet(ctx context.Context) error {
	o := s.opts
	args := []string{"raylet", "--address", o.gcsAddress, "--node-ip-address", o.nodeIP, "--node-id", s.nodeID,
		"--log-level", o.logLevel, "--log-file", filepath.Join(s.logDir, "raylet.log"), "--pprof", o.rayletPprof,
		"--resources", o.resources.resources, "--num-cpus", o.resources.numCPUs, "--num-gpus", o.resources.numGPUs,
		"--object-store-memory", o.resources.objectStoreMemory, "--labels", o.resources.labels, "--node-name", o.nodeName,
		"--gpu-sim", o.resources.gpuSim, "--gpu-sim-rack", o.resources.gpuRack, "--gpu-sim-dir", s.sessionDir,
		"--mig", o.resources.mig, "--mig-idle-timeout", o.resources.migIdle.String(),
		"--gpu-activity-interval", o.resources.gpuActivityInterval.String(), "--worker-log-dir", s.logDir,
		"--spot-metadata-url", o.resources.spotMetadataURL,
		"--metrics-export-port", strconv.Itoa(o.metricsPort)}
	if o.head {
		args = append(args, "--head")
	}
	d, err := s.spawn("raylet", args)
	if err != nil {
		return err
	}
	s.raylet = d
	err = waitUntil(ctx, 30*time.Second, d, func(ctx context.Context) error {
		return nodeAlive(ctx, o.gcsAddress, s.nodeID)
	})
	if err != nil {
		return fmt.Errorf("the raylet did not register: %w (see %s)", err, filepath.Join(s.logDir, "raylet.out"))
	}
	s.log.Info().Int("pid", d.cmd.Process.Pid).Str("node_id", s.nodeID).Msg("raylet up")
	return nil
}

func nodeAlive(ctx context.Context, gcsAddress, nodeID string) error {
	conn, err := rpcutil.Dial(gcsAddress, rpcutil.DialOptions{})
	if err != nil {
		return err
	}
	defer conn.Close()
	reply, err := pb.NewNodeInfoServiceClient(conn).GetAllNodeInfo(ctx, &pb.GetAllNodeInfoRequest{AliveOnly: true})
	if err != nil {
		return err
	}
	for _, n := range reply.Nodes {
		if n.NodeId == nodeID {
			return nil
		}
	}
	return errors.New("node not registered yet")
}

// waitUntil polls check every 100 ms until it succeeds, the daemon exits or the timeout
// passes.
func waitUntil(ctx context.Context, timeout time.Duration, d *daemon, check func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		callCtx, cancel := context.WithTimeout(ctx, time.Second)
		last = check(callCtx)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case err := <-d.exited:
			d.exited <- err // keep it for the watcher
			return fmt.Errorf("%s exited: %s", d.name, exitText(err))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("gave up after %s: %v", timeout, last)
}

// stopAll stops the autoscaler, the raylet, then the GCS: SIGTERM, then SIGKILL after 5 s.
func (s *supervisor) stopAll() {
	for _, d := range []*daemon{s.autoscaler, s.raylet, s.gcs} {
		if d == nil || d.cmd.Process == nil {
			continue
		}
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-d.exited:
			d.exited <- err
		case <-time.After(5 * time.Second):
			s.log.Warn().Str("daemon", d.name).Msg("did not stop within 5 s; killing it")
			_ = d.cmd.Process.Kill()
		}
	}
}

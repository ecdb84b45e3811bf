package fakemultinode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/autoscaler/provider"
	"github.com/raygo-dev/raygo/internal/proc"
	"github.com/raygo-dev/raygo/internal/testutil/poll"
)

// sleeper stands in for the raygo executable (a shell that keeps its command line, with
// the instance id, and ends its sleep on SIGTERM): the provider's bookkeeping (state file,
// liveness by pid and command line, termination) is what this test checks; launching
// real raylets is tests/autoscaler's.
func sleeper(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "raygo")
	if err := os.WriteFile(path, []byte("#!/bin/sh\nsleep 60 &\ntrap 'kill $!; exit 0' TERM\nwait\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLaunchListTerminate(t *testing.T) {
	dir := t.TempDir()
	p, err := New(Config{Dir: dir, GCSAddress: "127.0.0.1:1", Raygo: sleeper(t), TerminateGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	launched, err := p.Launch(ctx, provider.LaunchRequest{NodeType: "cpu4", Resources: map[string]float64{"CPU": 4}, Count: 2, RequestID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Terminate(ctx, []string{launched[0].ID, launched[1].ID}) })
	listed, err := p.Instances(ctx)
	if err != nil || len(listed) != 2 {
		t.Fatalf("instances = %v, %v; want 2", listed, err)
	}
	// A second provider on the same directory (an autoscaler restarted) sees them.
	again, err := New(Config{Dir: dir, GCSAddress: "127.0.0.1:1", Raygo: sleeper(t)})
	if err != nil {
		t.Fatal(err)
	}
	if listed, _ := again.Instances(ctx); len(listed) != 2 || listed[0].RequestID != "r1" || listed[0].NodeType != "cpu4" {
		t.Fatalf("a restarted provider lists %+v", listed)
	}
	if err := p.Terminate(ctx, []string{launched[0].ID}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, 50*time.Millisecond, "the terminated instance gone", func() error {
		listed, err := p.Instances(ctx)
		if err != nil {
			return err
		}
		if len(listed) != 1 || listed[0].ID != launched[1].ID {
			return fmt.Errorf("instances %v", listed)
		}
		return nil
	})
}

func TestARecordWhosePidWasReusedIsNotAlive(t *testing.T) {
	p := &Provider{}
	// This test process runs, but its command line does not name the instance.
	if p.alive(record{ID: "local-0123456789ab", PID: os.Getpid()}) {
		t.Fatal("a pid running something else counts as the instance")
	}
	if p.alive(record{ID: "local-x", PID: 1 << 30}) {
		t.Fatal("a pid that does not exist counts as alive")
	}
}

// recorder stands in for the raygo executable: it appends its arguments to file, then
// waits like sleeper.
func recorder(t *testing.T, file string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "raygo")
	script := fmt.Sprintf("#!/bin/sh\necho start \"$@\" >> '%s'\nsleep 60 &\ntrap 'kill $!; exit 0' TERM\nwait\n", file)
	if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

func launchOne(t *testing.T, p *Provider) provider.Instance {
	t.Helper()
	ctx := context.Background()
	launched, err := p.Launch(ctx, provider.LaunchRequest{NodeType: "cpu4", Resources: map[string]float64{"CPU": 4}, Count: 1, RequestID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Terminate(ctx, []string{launched[0].ID}) })
	return launched[0]
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(raw)
}

// TestSetupCommandsRunBeforeTheNodeStarts: the type's initialization commands, then its
// setup commands, then raygo start (with the instance's name), each echoed in the
// node's log.
func TestSetupCommandsRunBeforeTheNodeStarts(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(t.TempDir(), "trace")
	var asked []string
	p, err := New(Config{Dir: dir, GCSAddress: "127.0.0.1:1", Raygo: recorder(t, trace), TerminateGrace: time.Second,
		Commands: func(nodeType string) ([]string, []string) {
			asked = append(asked, nodeType)
			return []string{"echo init >> '" + trace + "'"}, []string{"echo setup-1 >> '" + trace + "'", "echo setup-2 >> '" + trace + "'"}
		}})
	if err != nil {
		t.Fatal(err)
	}
	inst := launchOne(t, p)
	poll.Until(t, 10*time.Second, 50*time.Millisecond, "raygo start run", func() error {
		if !strings.Contains(readFile(t, trace), "start ") {
			return fmt.Errorf("trace %q", readFile(t, trace))
		}
		return nil
	})
	lines := strings.Split(strings.TrimSpace(readFile(t, trace)), "\n")
	if len(lines) != 4 || lines[0] != "init" || lines[1] != "setup-1" || lines[2] != "setup-2" ||
		!strings.HasPrefix(lines[3], "start start --address 127.0.0.1:1 --block") || !strings.Contains(lines[3], "--node-name "+inst.ID) {
		t.Fatalf("trace:\n%s", strings.Join(lines, "\n"))
	}
	if len(asked) != 1 || asked[0] != "cpu4" {
		t.Fatalf("commands asked for %v, want [cpu4]", asked)
	}
	if log := readFile(t, filepath.Join(dir, "logs", inst.ID+".out")); !strings.Contains(log, "+ echo setup-2") {
		t.Fatalf("the node's log does not echo the commands:\n%s", log)
	}
	// The node is alive as raygo start (exec'd by the shell): listed, and not in setup.
	if listed, _ := p.Instances(context.Background()); len(listed) != 1 || listed[0].ID != inst.ID {
		t.Fatalf("instances %v", listed)
	}
}

// TestAFailingSetupCommandStopsTheNode: the commands after it and raygo start never run,
// the log says why, and the instance is gone from Instances.
func TestAFailingSetupCommandStopsTheNode(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(t.TempDir(), "trace")
	p, err := New(Config{Dir: dir, GCSAddress: "127.0.0.1:1", Raygo: recorder(t, trace), TerminateGrace: time.Second,
		Commands: func(string) ([]string, []string) {
			return nil, []string{"echo before >> '" + trace + "'", "exit 3", "echo after >> '" + trace + "'"}
		}})
	if err != nil {
		t.Fatal(err)
	}
	inst := launchOne(t, p)
	poll.Until(t, 10*time.Second, 50*time.Millisecond, "the failed node gone", func() error {
		if listed, err := p.Instances(context.Background()); err != nil || len(listed) != 0 {
			return fmt.Errorf("instances %v, %v", listed, err)
		}
		return nil
	})
	if got := readFile(t, trace); got != "before\n" {
		t.Fatalf("trace %q, want only the command before the failing one", got)
	}
	if log := readFile(t, filepath.Join(dir, "logs", inst.ID+".out")); !strings.Contains(log, "a setup command failed (exit status 3)") {
		t.Fatalf("the node's log does not say the setup failed:\n%s", log)
	}
}

// TestTerminatingANodeInSetupEndsItsCommands: a node terminated while a setup command
// runs leaves no process behind.
func TestTerminatingANodeInSetupEndsItsCommands(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(t.TempDir(), "pid")
	p, err := New(Config{Dir: dir, GCSAddress: "127.0.0.1:1", Raygo: sleeper(t), TerminateGrace: time.Second,
		Commands: func(string) ([]string, []string) {
			return nil, []string{"sleep 60 & echo $! > '" + pidFile + "'; wait"}
		}})
	if err != nil {
		t.Fatal(err)
	}
	inst := launchOne(t, p)
	var pid int
	poll.Until(t, 10*time.Second, 50*time.Millisecond, "the setup command running", func() error {
		_, err := fmt.Sscan(readFile(t, pidFile), &pid)
		return err
	})
	t.Cleanup(func() {
		if proc.Alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if err := p.Terminate(context.Background(), []string{inst.ID}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, 50*time.Millisecond, "the setup command ended", func() error {
		if proc.Alive(pid) {
			return fmt.Errorf("pid %d (sleep of the setup command) alive", pid)
		}
		return nil
	})
}

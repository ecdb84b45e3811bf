package fakemultinode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/autoscaler/provider"
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

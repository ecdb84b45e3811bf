// Package actorstasks tests the Go SDK's tasks and actors end to end: clusters of real
// raygo processes on loopback, with this test binary as the driver and, started by the
// raylets, as the workers.
package actorstasks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/sdk"
	"github.com/raygo-dev/raygo/tests/harness"
)

// WorkerView is what tasks and actors report from inside their worker.
type WorkerView struct {
	NodeID             string
	PID                int
	CUDAVisibleDevices string
	CUDADeviceOrder    string
	PlacementGroupID   string
	Bundle             int
}

func view() WorkerView {
	w, _ := sdk.CurrentWorker()
	return WorkerView{NodeID: w.NodeID, PID: w.PID, CUDAVisibleDevices: os.Getenv("CUDA_VISIBLE_DEVICES"),
		CUDADeviceOrder: os.Getenv("CUDA_DEVICE_ORDER"), PlacementGroupID: w.PlacementGroupID, Bundle: w.BundleIndex}
}

// Counter is the test actor.
type Counter struct{ n int }

func (c *Counter) Add(d int) int     { c.n += d; return c.n }
func (c *Counter) Where() WorkerView { return view() }
func (c *Counter) Fail() error       { return errors.New("counter says no") }

// Sleep writes marker (so a test knows the call runs), then sleeps.
func (c *Counter) Sleep(ms int, marker string) (string, error) {
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		return "", err
	}
	time.Sleep(time.Duration(ms) * time.Millisecond)
	return "slept", nil
}

func init() {
	sdk.RegisterTask("where", view)
	sdk.RegisterTask("square", func(x int) int { return x * x })
	sdk.RegisterTask("add", func(a, b int) int { return a + b })
	sdk.RegisterTask("divide", func(a, b int) (int, error) {
		if b == 0 {
			return 0, errors.New("division by zero")
		}
		return a / b, nil
	})
	sdk.RegisterTask("panics", func() int { panic("task panicked on purpose") })
	// dieOnce kills its own worker the first time (marked by a file), then succeeds.
	sdk.RegisterTask("dieOnce", func(marker string) (int, error) {
		if _, err := os.Stat(marker); errors.Is(err, os.ErrNotExist) {
			if err := os.WriteFile(marker, []byte(fmt.Sprint(os.Getpid())), 0o644); err != nil {
				return 0, err
			}
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		return os.Getpid(), nil
	})
	// sleepy writes its pid to marker (so a test knows it runs), then sleeps.
	sdk.RegisterTask("sleepy", func(ms int, marker string) (int, error) {
		if err := os.WriteFile(marker, []byte(fmt.Sprint(os.Getpid())), 0o644); err != nil {
			return 0, err
		}
		time.Sleep(time.Duration(ms) * time.Millisecond)
		return os.Getpid(), nil
	})
	sdk.RegisterTask("dieAlways", func() int {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		return 0
	})
	sdk.RegisterActor("Counter", func(start int) *Counter { return &Counter{n: start} })
	sdk.RegisterActor("Broken", func() (*Counter, error) { return nil, errors.New("no constructor for you") })
}

func TestMain(m *testing.M) {
	sdk.ServeIfWorker()
	os.Exit(runAsDriverIfAsked(m))
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func connect(t *testing.T, c *harness.Cluster) *sdk.Client {
	t.Helper()
	client, err := sdk.Connect(testContext(t), sdk.Options{Address: c.GCSAddress})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}

// result waits (at most 2 minutes) for what a Submit or Call returned: result(client.Submit(...)).
func result[T any](ref *sdk.ObjectRef, err error) (T, error) {
	var out T
	if err != nil {
		return out, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = sdk.Get(ctx, ref, &out)
	return out, err
}

func alive(pid int) bool { return harness.ProcessAlive(pid) }

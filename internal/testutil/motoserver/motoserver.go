// Package motoserver runs moto_server (the Python package moto[server], pinned in
// pyclient/requirements-dev.txt and installed into .venv/ by `make venv`) on a free
// loopback port for a test: a local EC2 endpoint the aws provider's tests launch
// instances in. Each server keeps its state in memory and ends with the test.
package motoserver

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/testutil/poll"
)

// Region is the region the tests use; moto creates a default VPC with one subnet per
// zone in it.
const Region = "us-west-2"

// Executable is .venv/bin/moto_server of this checkout, or the reason there is none.
func Executable() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the test's directory")
		}
		dir = parent
	}
	path := filepath.Join(dir, ".venv", "bin", "moto_server")
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s is missing: run `make venv` (scripts/ensure-venv.sh installs moto[server] from pyclient/requirements-dev.txt)", path)
	}
	return path, nil
}

// Start runs a moto_server on 127.0.0.1 and returns its endpoint URL
// (http://127.0.0.1:PORT); it is killed when the test ends. The test fails when moto is
// not installed, with the command that installs it.
func Start(t testing.TB) string {
	t.Helper()
	exe, err := Executable()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	logPath := filepath.Join(t.TempDir(), "moto.log")
	out, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		out.Close()
	})
	endpoint := "http://127.0.0.1:" + strconv.Itoa(port)
	poll.Until(t, 30*time.Second, 100*time.Millisecond, "moto_server answers on "+endpoint+" (log "+logPath+")", func() error {
		resp, err := http.Get(endpoint + "/moto-api/")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
	return endpoint
}

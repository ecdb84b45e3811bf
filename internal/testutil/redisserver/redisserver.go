// Package redisserver runs a real redis-server on loopback for tests, so the Redis
// store is tested against the server it will meet in production rather than a fake.
package redisserver

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

const (
	// startTimeout bounds how long a server may take to answer PING after it starts;
	// replaying a large append-only file is the slow case.
	startTimeout = 10 * time.Second
	// stopTimeout bounds a graceful shutdown before Stop kills the server.
	stopTimeout = 10 * time.Second
	// pollInterval is the pause between two PINGs while waiting for the server.
	pollInterval = 20 * time.Millisecond
	// portAttempts is how many free ports Start tries: a port found free can be
	// taken by another process before redis-server binds it.
	portAttempts = 3
)

// Options changes how the server keeps its data.
type Options struct {
	// Dir is the server's working directory, holding its log and, with AppendOnly,
	// its append-only file. Empty means a fresh t.TempDir().
	Dir string
	// Volatile turns off the append-only file. By default the server keeps one, synced on
	// every write (appendfsync always), as raygo requires: a server that is killed and
	// restarted still has every write it acknowledged.
	Volatile bool
	// Password, when set, is required of every client (requirepass).
	Password string
}

// Server is one redis-server process. Its methods are meant for the test's own
// goroutine and are not safe for concurrent use.
type Server struct {
	// Addr is the server's "127.0.0.1:<port>"; it stays the same across Restart.
	Addr string

	t       testing.TB
	binary  string
	opts    Options
	cmd     *exec.Cmd
	exited  chan struct{} // closed once cmd has been waited for
	logPath string
}

// Start runs a redis-server that keeps nothing on disk and is killed when the test
// ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWithOptions(t, Options{})
}

// StartWithOptions runs a redis-server configured by opts and kills it when the test
// ends. It fails the test, never skips it: a skipped Redis test would pass in CI
// without testing anything.
func StartWithOptions(t testing.TB, opts Options) *Server {
	t.Helper()
	binary, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server is not on PATH (%v): run `make test`, which installs it", err)
	}
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	// redis-server changes into --dir before it opens its log, so relative paths
	// would point somewhere else.
	if opts.Dir, err = filepath.Abs(opts.Dir); err != nil {
		t.Fatalf("redis-server dir %q: %v", opts.Dir, err)
	}
	s := &Server{
		t:       t,
		binary:  binary,
		opts:    opts,
		logPath: filepath.Join(opts.Dir, "redis.log"),
	}
	t.Cleanup(s.Kill)

	var startErr error
	for range portAttempts {
		port, err := freeLoopbackPort()
		if err != nil {
			t.Fatalf("find a free port for redis-server: %v", err)
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if startErr = s.start(); startErr == nil {
			return s
		}
	}
	t.Fatalf("start redis-server after %d attempts: %v", portAttempts, startErr)
	return nil
}

// Stop shuts the server down gracefully (SIGTERM), killing it if it has not exited
// within stopTimeout. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.t.Helper()
	if !s.running() {
		return
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.t.Errorf("redis-server at %s: send SIGTERM: %v", s.Addr, err)
	}
	select {
	case <-s.exited:
	case <-time.After(stopTimeout):
		s.t.Errorf("redis-server at %s did not exit within %s of SIGTERM; killing it", s.Addr, stopTimeout)
		s.Kill()
	}
}

// Kill ends the server at once (SIGKILL), as a crash would, and waits for it.
// Killing a stopped server does nothing.
func (s *Server) Kill() {
	s.t.Helper()
	if !s.running() {
		return
	}
	// An error here means the process is already gone, which is what Kill wants.
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// Restart stops the server if it runs and starts it again on the same address and
// directory, so with AppendOnly it comes back with its data.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		s.t.Fatalf("restart redis-server: %v", err)
	}
}

func (s *Server) running() bool {
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// start runs redis-server on s.Addr and waits until it answers PING.
func (s *Server) start() error {
	_, port, err := net.SplitHostPort(s.Addr)
	if err != nil {
		return fmt.Errorf("redis-server address %q: %w", s.Addr, err)
	}
	appendOnly := "no"
	if !s.opts.Volatile {
		appendOnly = "yes"
	}
	args := []string{
		"--port", port,
		"--bind", "127.0.0.1",
		"--protected-mode", "no",
		"--save", "",
		"--appendonly", appendOnly,
		"--appendfsync", "always",
		"--dir", s.opts.Dir,
		"--logfile", s.logPath,
	}
	if s.opts.Password != "" {
		args = append(args, "--requirepass", s.opts.Password)
	}
	cmd := exec.Command(s.binary, args...)
	// A test binary that dies on a panic or timeout must not leave servers behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("run %s: %w", s.binary, err)
	}
	exited := make(chan struct{})
	go func() {
		// The exit status says nothing the log does not; a killed server always
		// reports one.
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited

	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-exited:
			return fmt.Errorf("redis-server on %s exited during start-up; log:\n%s", s.Addr, s.logTail())
		default:
		}
		if ping(s.Addr, s.opts.Password) == nil {
			return nil
		}
		if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("redis-server on %s did not answer PING within %s; log:\n%s", s.Addr, startTimeout, s.logTail())
		}
		time.Sleep(pollInterval)
	}
}

// logTail returns the end of the server's log, which says why it failed to start.
func (s *Server) logTail() string {
	const maxBytes = 2048
	log, err := os.ReadFile(s.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	if len(log) > maxBytes {
		log = log[len(log)-maxBytes:]
	}
	return string(log)
}

// ping speaks RESP directly so the helper does not depend on the client under test.
// A server still loading its data answers -LOADING, which counts as not ready.
func ping(addr, password string) error {
	conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(500 * time.Millisecond)); err != nil {
		return err
	}
	reader := bufio.NewReader(conn)
	if password != "" {
		if _, err := fmt.Fprintf(conn, "*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n", len(password), password); err != nil {
			return err
		}
		if reply, err := reader.ReadString('\n'); err != nil || reply != "+OK\r\n" {
			return fmt.Errorf("AUTH answered %q (%v)", reply, err)
		}
	}
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	reply, err := reader.ReadString('\n')
	if err != nil {
		return err
	}
	if reply != "+PONG\r\n" {
		return errors.New("PING answered " + strconv.Quote(reply))
	}
	return nil
}

// freeLoopbackPort asks the kernel for a port that is free now; the caller must
// cope with it being taken before use.
func freeLoopbackPort() (int, error) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := listener.Addr().(*net.TCPAddr).Port
	if err := listener.Close(); err != nil {
		return 0, err
	}
	return port, nil
}

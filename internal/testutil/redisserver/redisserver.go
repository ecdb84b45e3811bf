// Package redisserver runs a real redis-server on loopback for tests, so the Redis
// store is tested against the server it will meet in production rather than a fake.
package redisserver

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
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
	// Password, when set, is required of every client (requirepass), or, with User,
	// is that user's.
	Password string
	// User, when set, is the one ACL user (all keys and commands, password Password);
	// the default user is off.
	User string
	// TLS, when set, makes the server speak only TLS (tls-port; no plaintext port),
	// with this certificate and key, and require clients to present one the CA signed.
	TLS *TLSFiles
}

// TLSFiles are the server's PEM files.
type TLSFiles struct {
	CA, Cert, Key string
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
	}
	if s.opts.TLS != nil {
		args = []string{"--port", "0", "--tls-port", port, "--tls-cert-file", s.opts.TLS.Cert, "--tls-key-file", s.opts.TLS.Key,
			"--tls-ca-cert-file", s.opts.TLS.CA, "--tls-auth-clients", "yes"}
	}
	args = append(args,
		"--bind", "127.0.0.1",
		"--protected-mode", "no",
		"--save", "",
		"--appendonly", appendOnly,
		"--appendfsync", "always",
		"--dir", s.opts.Dir,
		"--logfile", s.logPath,
	)
	switch {
	case s.opts.User != "":
		args = append(args, "--user", s.opts.User, "on", ">"+s.opts.Password, "~*", "&*", "+@all", "--user", "default", "off")
	case s.opts.Password != "":
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
		if s.ping() == nil {
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
func (s *Server) ping() error {
	var conn net.Conn
	var err error
	if s.opts.TLS != nil {
		var config *tls.Config
		if config, err = s.opts.TLS.clientConfig(); err != nil {
			return err
		}
		conn, err = tls.DialWithDialer(&net.Dialer{Timeout: 200 * time.Millisecond}, "tcp", s.Addr, config)
	} else {
		conn, err = net.DialTimeout("tcp", s.Addr, 200*time.Millisecond)
	}
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(500 * time.Millisecond)); err != nil {
		return err
	}
	reader := bufio.NewReader(conn)
	if password := s.opts.Password; password != "" {
		var err error
		if user := s.opts.User; user != "" {
			_, err = fmt.Fprintf(conn, "*3\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(user), user, len(password), password)
		} else {
			_, err = fmt.Fprintf(conn, "*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n", len(password), password)
		}
		if err != nil {
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

// clientConfig presents the server's own certificate as a client's and trusts the CA.
func (f *TLSFiles) clientConfig() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, err
	}
	pem, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("no PEM certificate in " + f.CA)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
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

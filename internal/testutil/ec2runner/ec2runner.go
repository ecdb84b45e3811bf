// Package ec2runner plays EC2's part of booting instances for tests against moto_server:
// it polls moto for the running instances of a cluster and runs each one's user data
// with sh as a local process, as cloud-init would, with an instance metadata server on
// loopback (instance-id, and local-ipv4: a 127.0.0.N address of its own, so each node's
// raylet binds and advertises a distinct loopback address; spot/instance-action once
// the test interrupts the instance). It stops an instance's process when moto reports
// the instance terminated. moto's own private IPs are never used.
package ec2runner

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// Config says which instances to run and how.
type Config struct {
	// Endpoint is moto's URL (not a fault-injecting proxy's).
	Endpoint, Region string
	// ClusterName selects the instances: tag ray-cluster-name.
	ClusterName string
	// MetadataURLEnv is the variable the user data reads the metadata address from.
	MetadataURLEnv string
	// PathDir is put first in the scripts' PATH (where a `raygo` executable is).
	PathDir string
	// Env is added to the scripts' environment (RAYGO_TEMP_DIR=…).
	Env []string
	// LogDir receives each instance's output, <instance id>.out.
	LogDir string
}

// Runner runs the cluster's instances until the test ends.
type Runner struct {
	cfg      Config
	client   *ec2.Client
	metadata *httptest.Server

	// ctx ends with the test: it stops the interruptions' terminations.
	ctx context.Context

	mu      sync.Mutex
	running map[string]*exec.Cmd // by instance id
	ips     map[string]string
	nextIP  int
	// notices are the interruption notices' deadlines, by instance id.
	notices map[string]time.Time
	timers  []*time.Timer
}

// Start polls moto every 200 ms; the test's end stops the poll and every process.
func Start(t testing.TB, cfg Config) *Runner {
	t.Helper()
	r := &Runner{
		cfg: cfg, running: map[string]*exec.Cmd{}, ips: map[string]string{}, nextIP: 2, notices: map[string]time.Time{},
		client: ec2.New(ec2.Options{Region: cfg.Region, BaseEndpoint: awssdk.String(cfg.Endpoint),
			Credentials: credentials.NewStaticCredentialsProvider("testing", "testing", "")}),
	}
	r.metadata = httptest.NewServer(http.HandlerFunc(r.serveMetadata))
	ctx, cancel := context.WithCancel(context.Background())
	r.ctx = ctx
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if err := r.poll(ctx); err != nil && ctx.Err() == nil {
				t.Logf("ec2runner: %v", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		r.mu.Lock()
		for _, timer := range r.timers {
			timer.Stop()
		}
		var groups []int
		for id, cmd := range r.running {
			groups = append(groups, cmd.Process.Pid)
			r.stop(id)
		}
		r.mu.Unlock()
		// The test process may exit before stop's SIGKILL: wait for the groups here.
		deadline := time.Now().Add(10 * time.Second)
		for _, pgid := range groups {
			for syscall.Kill(-pgid, 0) == nil && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
			}
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
		r.metadata.Close()
	})
	return r
}

// serveMetadata answers /<instance id>/latest/...: IMDSv2's token, instance-id,
// local-ipv4 and, once Interrupt was called, spot/instance-action.
func (r *Runner) serveMetadata(w http.ResponseWriter, req *http.Request) {
	id, path, _ := strings.Cut(strings.TrimPrefix(req.URL.Path, "/"), "/")
	r.mu.Lock()
	ip, ok := r.ips[id]
	deadline, interrupted := r.notices[id]
	r.mu.Unlock()
	switch {
	case !ok:
		http.NotFound(w, req)
	case req.Method == http.MethodPut && path == "latest/api/token":
		fmt.Fprint(w, "token-"+id)
	case req.Header.Get("X-aws-ec2-metadata-token") != "token-"+id:
		http.Error(w, "missing token", http.StatusUnauthorized)
	case path == "latest/meta-data/instance-id":
		fmt.Fprint(w, id)
	case path == "latest/meta-data/local-ipv4":
		fmt.Fprint(w, ip)
	case path == "latest/meta-data/spot/instance-action" && interrupted:
		fmt.Fprintf(w, `{"action": "terminate", "time": %q}`, deadline.UTC().Format(time.RFC3339))
	default:
		http.NotFound(w, req)
	}
}

// Interrupt plays EC2's spot interruption of instance id: from now on its metadata
// carries the notice (action terminate at deadline, whole seconds as EC2 gives it), and
// at the deadline the instance is terminated in moto, which stops its process.
func (r *Runner) Interrupt(t testing.TB, id string, deadline time.Time) {
	t.Helper()
	deadline = deadline.Truncate(time.Second)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notices[id] = deadline
	r.timers = append(r.timers, time.AfterFunc(time.Until(deadline), func() {
		if _, err := r.client.TerminateInstances(r.ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil && r.ctx.Err() == nil {
			t.Errorf("ec2runner: terminate the interrupted instance %s: %v", id, err)
		}
	}))
}

// IP is the loopback address instance id's node was given ("" if it never ran).
func (r *Runner) IP(id string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ips[id]
}

// Running is how many instances have a process running.
func (r *Runner) Running() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.running)
}

func (r *Runner) poll(ctx context.Context) error {
	out, err := r.client.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []types.Filter{
		{Name: awssdk.String("tag:ray-cluster-name"), Values: []string{r.cfg.ClusterName}},
	}})
	if err != nil {
		return err
	}
	for _, res := range out.Reservations {
		for _, inst := range res.Instances {
			id := awssdk.ToString(inst.InstanceId)
			r.mu.Lock()
			_, started := r.running[id]
			_, seen := r.ips[id]
			r.mu.Unlock()
			switch {
			case inst.State.Name == types.InstanceStateNameRunning && !seen:
				if err := r.boot(ctx, id); err != nil {
					return fmt.Errorf("boot %s: %w", id, err)
				}
			case inst.State.Name != types.InstanceStateNameRunning && inst.State.Name != types.InstanceStateNamePending && started:
				r.mu.Lock()
				r.stop(id)
				r.mu.Unlock()
			}
		}
	}
	return nil
}

// boot runs the instance's user data.
func (r *Runner) boot(ctx context.Context, id string) error {
	attr, err := r.client.DescribeInstanceAttribute(ctx, &ec2.DescribeInstanceAttributeInput{InstanceId: &id, Attribute: types.InstanceAttributeNameUserData})
	if err != nil {
		return err
	}
	script, err := base64.StdEncoding.DecodeString(awssdk.ToString(attr.UserData.Value))
	if err != nil {
		return err
	}
	out, err := os.Create(filepath.Join(r.cfg.LogDir, id+".out"))
	if err != nil {
		return err
	}
	defer out.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ips[id] = fmt.Sprintf("127.0.0.%d", r.nextIP)
	r.nextIP++
	cmd := exec.Command("sh", "-c", string(script))
	cmd.Env = append(os.Environ(), r.cfg.Env...)
	cmd.Env = append(cmd.Env, "PATH="+r.cfg.PathDir+":"+os.Getenv("PATH"), r.cfg.MetadataURLEnv+"="+r.metadata.URL+"/"+id)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	r.running[id] = cmd
	return nil
}

// stop ends instance id's process group: SIGTERM, SIGKILL 10 s later. r.mu is held.
func (r *Runner) stop(id string) {
	cmd := r.running[id]
	delete(r.running, id)
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	go func() {
		time.Sleep(10 * time.Second)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}()
}

package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// peerNamespace is a network namespace the test creates beside its own (which the run
// created: scripts/in-netns.sh), joined to it by a veth pair. A raylet started in it
// reaches the GCS only over that link, and taking the link down partitions it.
type peerNamespace struct {
	holder *exec.Cmd // `unshare -n sleep`, which keeps the namespace while it lives
	// link is the veth end in the test's namespace.
	link string
	// ownIP is the test namespace's address on the link, peerIP the peer's.
	ownIP, peerIP string
}

// Addresses of the link: a /30 of the 198.18.0.0/15 benchmarking range (RFC 2544), on
// no interface but the test's own.
const (
	linkOwnIP  = "198.18.0.1"
	linkPeerIP = "198.18.0.2"
	linkPrefix = "/30"
)

// newPeerNamespace creates the namespace and the link, both removed at cleanup (the
// namespace goes with its holder, and the veth pair with it).
func newPeerNamespace(t *testing.T) *peerNamespace {
	t.Helper()
	holder := exec.Command("unshare", "-n", "sleep", "infinity")
	holder.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := holder.Start(); err != nil {
		t.Fatalf("create a network namespace (unshare -n): %v", err)
	}
	n := &peerNamespace{holder: holder, link: fmt.Sprintf("rgc%d", os.Getpid()%100000), ownIP: linkOwnIP, peerIP: linkPeerIP}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	pid := strconv.Itoa(holder.Process.Pid)
	peerLink := n.link + "p"
	// The holder may not have unshared yet: retry moving the link until its namespace
	// differs from ours.
	own, _ := os.Readlink("/proc/self/ns/net")
	for i := 0; ; i++ {
		theirs, err := os.Readlink("/proc/" + pid + "/ns/net")
		if err == nil && theirs != own {
			break
		}
		if i == 1000 {
			t.Fatal("unshare -n: the namespace was not created")
		}
		time.Sleep(5 * time.Millisecond)
	}
	n.run(t, "ip", "link", "add", n.link, "type", "veth", "peer", "name", peerLink, "netns", pid)
	n.run(t, "ip", "addr", "add", n.ownIP+linkPrefix, "dev", n.link)
	n.run(t, "ip", "link", "set", n.link, "up")
	for _, args := range [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "addr", "add", n.peerIP + linkPrefix, "dev", peerLink},
		{"ip", "link", "set", peerLink, "up"},
	} {
		n.run(t, append(n.prefix(), args...)...)
	}
	return n
}

// prefix runs a command in the namespace (nsenter execs it: its pid is the command's).
func (n *peerNamespace) prefix() []string {
	return []string{"nsenter", "-t", strconv.Itoa(n.holder.Process.Pid), "-n", "--"}
}

// setLink takes the link down (a partition) or up.
func (n *peerNamespace) setLink(t *testing.T, up bool) {
	t.Helper()
	state := "down"
	if up {
		state = "up"
	}
	n.run(t, "ip", "link", "set", n.link, state)
}

func (n *peerNamespace) run(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

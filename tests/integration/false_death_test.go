package integration

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/rs/zerolog"

	"github.com/raygo-dev/raygo/gcs"
	"github.com/raygo-dev/raygo/internal/testutil/logbuf"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
	"github.com/raygo-dev/raygo/tests/harness"
)

// gossipDeath sends the GCS's memberlist the message a member cut off by a partition
// sends about the others once its link returns: "node is dead", from a third member.
// It is memberlist's dead message (type 5, then msgpack of incarnation, node, from).
func gossipDeath(t *testing.T, gossipAddress, node string, incarnation uint32) {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteByte(5)
	msg := struct {
		Incarnation uint32
		Node        string
		From        string
	}{incarnation, node, "partitioned-member"}
	if err := codec.NewEncoder(&buf, &codec.MsgpackHandle{}).Encode(&msg); err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("udp", gossipAddress)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
}

// A member that was partitioned away gossips the others as dead when it comes back;
// memberlist believes it. The GCS must not: a raylet that answers the GCS stays ALIVE
// (before, the node was marked DEAD at once and its raylet exited, losing capacity).
// That a raylet which stops answering is still DEAD within 10 s is
// TestKilledRayletIsDeadWithinTenSeconds.
func TestAFalseDeathReportDoesNotKillARayletThatAnswers(t *testing.T) {
	t.Parallel()
	logs := &logbuf.Buffer{}
	c := harness.StartInProcess(t, nil, func(cfg *gcs.Config) { cfg.Logger = zerolog.New(logs) })
	victim := c.AddRaylet(map[string]float64{"CPU": 1}, nil)
	nodes := harness.Dial(t, c.GCS.Address()).Nodes

	state := func(id string) (pb.NodeState, error) {
		reply, err := nodes.GetAllNodeInfo(context.Background(), &pb.GetAllNodeInfoRequest{})
		if err != nil {
			return 0, err
		}
		if n := harness.FindNode(reply.Nodes, id); n != nil {
			return n.State, nil
		}
		return 0, fmt.Errorf("node %s unknown", id)
	}
	// Lie about the victim for 3 s, each time with a newer incarnation than its last
	// refutation; the first lies may arrive before the GCS's memberlist has merged it.
	for i := 0; i < 15; i++ {
		gossipDeath(t, c.GCS.GossipAddress(), victim.NodeID(), uint32(1000+100*i))
		time.Sleep(200 * time.Millisecond)
		if s, err := state(victim.NodeID()); err != nil || s != pb.NodeState_ALIVE {
			t.Fatalf("after false death report %d the victim is %v (%v); the GCS logged:\n%s", i+1, s, err, logs)
		}
	}
	if !logs.Has("its raylet answers") {
		t.Fatalf("the GCS never heard the false report, so this test proved nothing; it logged:\n%s", logs)
	}
}

package raylet

import (
	"time"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// heartbeatRequest is the report a raylet sends the GCS: its available resources (and
// MIG slot maps) at their version, and its gossip address.
func heartbeatRequest(nodeID string, report *pb.ResourceReport, gossipAddress string) *pb.ReportHeartbeatRequest {
	return &pb.ReportHeartbeatRequest{
		NodeId: nodeID, ResourcesAvailable: report.ResourcesAvailable, ResourcesVersion: report.Version,
		GossipAddress: gossipAddress, MigGpus: report.MigGpus,
	}
}

// IdleReporting is how a raylet on which nothing changes reports to the GCS: a
// heartbeat every Every. Benchmarks use it to stand in for thousands of idle raylets.
type IdleReporting struct {
	Every time.Duration
	// available is what an idle node reports as available (its whole offer).
	available map[string]float64
}

// IdleReports is the reporting of an idle raylet with cfg whose node offers available.
func IdleReports(cfg Config, available map[string]float64) IdleReporting {
	return IdleReporting{Every: cfg.HeartbeatInterval, available: available}
}

// Request is the heartbeat the idle raylet of nodeID sends.
func (p IdleReporting) Request(nodeID string) *pb.ReportHeartbeatRequest {
	return heartbeatRequest(nodeID, &pb.ResourceReport{ResourcesAvailable: p.available}, "")
}

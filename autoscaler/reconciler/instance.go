package reconciler

import (
	"time"

	"github.com/raygo-dev/raygo/autoscaler/provider"
)

// State is an instance's place in its life, named as Ray 2.60's instance manager names
// it (instance_manager.proto's Instance.InstanceStatus), so `raygo status` reads as
// `ray status` does.
type State string

const (
	// Queued: the plan wants the instance; the provider has not been asked yet.
	Queued State = "QUEUED"
	// Requested: the provider was asked; the instance does not exist yet.
	Requested State = "REQUESTED"
	// Allocated: the machine exists; its raylet has not registered.
	Allocated State = "ALLOCATED"
	// RayInstalling: raygo is being set up on the machine (user data, setup commands).
	RayInstalling State = "RAY_INSTALLING"
	// RayRunning: the node's raylet is registered with the GCS.
	RayRunning State = "RAY_RUNNING"
	// RayStopRequested: the GCS accepted a drain of the node; it will be terminated.
	RayStopRequested State = "RAY_STOP_REQUESTED"
	// RayStopping: the node's raylet is stopping.
	RayStopping State = "RAY_STOPPING"
	// RayStopped: the node's raylet is gone (dead in the GCS) while the machine exists.
	RayStopped State = "RAY_STOPPED"
	// Terminating: the provider was asked to terminate the machine.
	Terminating State = "TERMINATING"
	// Terminated: the machine is gone.
	Terminated State = "TERMINATED"
	// AllocationFailed: the provider refused the launch (after the retries).
	AllocationFailed State = "ALLOCATION_FAILED"
	// RayInstallFailed: the machine ran but its raylet never registered in time.
	RayInstallFailed State = "RAY_INSTALL_FAILED"
	// TerminationFailed: the machine outlived its termination's timeout; asked again.
	TerminationFailed State = "TERMINATION_FAILED"
	// AllocationTimeout: a requested machine did not appear in time.
	AllocationTimeout State = "ALLOCATION_TIMEOUT"
)

// Timeouts are the reconciler's deadlines between states, with Ray 2.60's defaults where
// the issue of the instance manager names them.
type Timeouts struct {
	// Requested is how long a REQUESTED instance may take to be ALLOCATED (600 s) before
	// it is ALLOCATION_TIMEOUT and requested again, at most RequestRetries (3) times.
	Requested      time.Duration
	RequestRetries int
	// Allocated is how long an ALLOCATED instance may take to register its raylet
	// (300 s) before it is RAY_INSTALL_FAILED and terminated.
	Allocated time.Duration
	// Terminating is how long a TERMINATING instance may take to disappear (300 s)
	// before it is TERMINATION_FAILED and terminated again.
	Terminating time.Duration
	// KeepFinished is how long TERMINATED and failed instances stay listed (as Ray's
	// "Recent failures") before they are forgotten (10 min).
	KeepFinished time.Duration
}

// DefaultTimeouts returns Ray's defaults.
func DefaultTimeouts() Timeouts {
	return Timeouts{
		Requested: 600 * time.Second, RequestRetries: 3,
		Allocated: 300 * time.Second, Terminating: 300 * time.Second,
		KeepFinished: 10 * time.Minute,
	}
}

// Instance is one machine the autoscaler launched or adopted.
type Instance struct {
	// ID is the provider's instance id ("" while QUEUED).
	ID       string
	NodeType string
	State    State
	// Since is when the instance entered State.
	Since time.Time
	// RequestedAt is when the provider was asked for it (zero for an adopted instance):
	// its REQUESTED→RAY_RUNNING time is the type's launch latency.
	RequestedAt time.Time
	// Attempts counts launch requests for it.
	Attempts int
	// NodeID is the GCS node id once its raylet registered.
	NodeID string
	// Detail says why the instance is in a failure or stop state.
	Detail string
	// Gangs are the placement groups the instance was launched for, until all the
	// instances launched for a group run: if one of them fails, they all go (a gang
	// gets all its new nodes or none).
	Gangs []string
}

// live reports whether the instance still holds, or will hold, a machine.
func (i *Instance) live() bool {
	switch i.State {
	case Terminated, AllocationFailed:
		return false
	}
	return true
}

// launching reports whether the instance will become a node without further launches.
func (i *Instance) launching() bool {
	switch i.State {
	case Queued, Requested, Allocated, RayInstalling:
		return true
	}
	return false
}

// nodeView is what the GCS says of one node, for the transitions.
type nodeView struct {
	NodeID string
	Alive  bool
}

// transition is one change advance decides.
type transition struct {
	Index int
	To    State
	// NodeID is set on RAY_RUNNING.
	NodeID string
	Detail string
	// Terminate asks the provider to terminate the instance after the change.
	Terminate bool
}

// advance moves every instance along Ray's state machine from what the provider and the
// GCS report. It is pure: the caller applies the transitions, calls the provider for
// those with Terminate, and stamps Since.
//
// cloud maps instance id → the provider's instance; nodes maps instance id → the GCS
// node carrying that instance's id label.
func advance(instances []Instance, cloud map[string]provider.Instance, nodes map[string]nodeView, now time.Time, t Timeouts) []transition {
	var out []transition
	for i, inst := range instances {
		_, inCloud := cloud[inst.ID]
		node, registered := nodes[inst.ID]
		age := now.Sub(inst.Since)
		switch inst.State {
		case Requested:
			switch {
			case inCloud:
				out = append(out, transition{Index: i, To: Allocated})
			case age > t.Requested:
				out = append(out, transition{Index: i, To: AllocationTimeout, Detail: "the provider did not allocate it within " + t.Requested.String()})
			}
		case Allocated, RayInstalling:
			switch {
			case registered && node.Alive:
				out = append(out, transition{Index: i, To: RayRunning, NodeID: node.NodeID})
			case !inCloud:
				out = append(out, transition{Index: i, To: Terminated, Detail: "the machine disappeared before its raylet registered"})
			case age > t.Allocated:
				out = append(out, transition{Index: i, To: RayInstallFailed, Detail: "its raylet did not register within " + t.Allocated.String(), Terminate: true})
			}
		case RayRunning:
			switch {
			case !inCloud:
				out = append(out, transition{Index: i, To: Terminated, Detail: "the machine disappeared"})
			case !registered || !node.Alive:
				out = append(out, transition{Index: i, To: RayStopped, Detail: "its raylet is dead", Terminate: true})
			}
		case RayStopRequested, RayStopping, RayStopped, RayInstallFailed:
			if !inCloud {
				out = append(out, transition{Index: i, To: Terminated, Detail: inst.Detail})
			}
		case Terminating, TerminationFailed:
			switch {
			case !inCloud:
				out = append(out, transition{Index: i, To: Terminated, Detail: inst.Detail})
			case age > t.Terminating:
				out = append(out, transition{Index: i, To: TerminationFailed, Detail: "still running " + t.Terminating.String() + " after its termination", Terminate: true})
			}
		}
	}
	return out
}

package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/raygo-dev/raygo/gcs"
	"github.com/raygo-dev/raygo/internal/nodelabel"
	"github.com/raygo-dev/raygo/internal/resources"
	"github.com/raygo-dev/raygo/raylet/gpu/gpusim"
)

// defaultAddress is the GCS address when neither --address nor RAYGO_ADDRESS says.
var defaultAddress = net.JoinHostPort("127.0.0.1", strconv.Itoa(gcs.DefaultPort))

// newFlagSet returns a flag set whose --help prints the description, the flags and the
// examples, and whose parse errors are bad input.
func newFlagSet(name, description, examples string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("raygo "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fs.SetOutput(stdout)
		fmt.Fprintf(stdout, "Usage: raygo %s [flags]\n\n%s\n", name, description)
		if scope := commandScopes[strings.Fields(name)[0]]; scope != "" {
			fmt.Fprintf(stdout, "\nToken (with auth on): %s.\n", scope)
		}
		fmt.Fprint(stdout, "\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprintf(stdout, "\nExamples:\n%s", examples)
	}
	return fs
}

// commandScopes says which token scope (raygo auth --help) each command that talks to
// a cluster needs; a command's --help prints it.
var commandScopes = map[string]string{
	"status":     "admin or node (it reads the autoscaler's cluster status)",
	"list":       "any scope; a tenant token (queue:<q>, namespace:<ns>) lists only its own placement groups and actors, a node token none",
	"queues":     "list: any scope; apply: admin",
	"drain":      "admin or node",
	"debug":      "admin: the cluster token itself (it asks the raylets, which show their state to no other)",
	"auth":       "admin",
	"start":      "the cluster token for --head; a worker node runs on it or on a node token (raygo auth issue --scope node), then its raylet and workers never hold the cluster token",
	"up":         "the cluster token itself (it starts the head; the head gives its autoscaler, and so the launched nodes, a node token)",
	"down":       "the cluster token itself",
	"raylet":     "the cluster token or a node token",
	"gcs-server": "the cluster token itself (it is the admin token)",
	"autoscaler": "a node token (raygo auth issue --scope node; the head issues its autoscaler one), which the nodes it launches join with",
}

// parseFlags parses args; --help prints usage (the flag package calls fs.Usage) and
// returns errHelp.
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		return errHelp
	}
	if err != nil {
		return badInput("%s: %v (see --help)", fs.Name(), err)
	}
	return nil
}

// parseFlagsAnywhere is parseFlags for commands whose arguments and flags may come in
// any order (`raygo up cluster.yaml --yes`, as Ray's CLI takes them); it returns the
// arguments.
func parseFlagsAnywhere(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// addressFlag registers --address, resolved later by resolveAddress.
func addressFlag(fs *flag.FlagSet) *string {
	return fs.String("address", "", "GCS HOST:PORT (default: RAYGO_ADDRESS, else "+defaultAddress+")")
}

// resolveAddress applies the rule: --address, else RAYGO_ADDRESS, else 127.0.0.1:6380.
func resolveAddress(flagValue string) (string, error) {
	addr := flagValue
	source := "--address"
	if addr == "" {
		addr, source = os.Getenv("RAYGO_ADDRESS"), "RAYGO_ADDRESS"
	}
	if addr == "" || addr == "auto" {
		return defaultAddress, nil
	}
	if err := checkHostPort(addr); err != nil {
		return "", badInput("%s %q: %v", source, addr, err)
	}
	return addr, nil
}

func checkHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("must be HOST:PORT")
	}
	if host == "" {
		return errors.New("missing host")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("port %q must be a number from 1 to 65535", port)
	}
	return nil
}

// nodeResourceFlags are the resource and label flags shared by `start` and `raylet`.
type nodeResourceFlags struct {
	resources string
	numCPUs   string
	numGPUs   string
	// objectStoreMemory is Ray's object_store_memory resource in bytes.
	objectStoreMemory string
	labels            string
	gpuSim            string
	gpuRack           string
	mig               string
	migIdle           time.Duration
	// gpuActivityInterval is how often the raylet samples GPU activity for /metrics.
	gpuActivityInterval time.Duration
	// spotMetadataURL is the instance metadata watched for a spot interruption notice.
	spotMetadataURL string
}

func (f *nodeResourceFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.mig, "mig", "off", "MIG mode of this node's GPUs: on (every GPU), off, or per GPU: 0:on,1:on (the others off). A GPU in MIG mode offers MIG slices (nvidia.com/mig-<profile>) instead of a whole GPU")
	fs.DurationVar(&f.migIdle, "mig-idle-timeout", 5*time.Minute, "an idle MIG instance (released, kept for reuse by the same profile) is destroyed after this long")
	fs.DurationVar(&f.gpuActivityInterval, "gpu-activity-interval", 5*time.Second, "how often the raylet samples its GPUs' activity and memory use (DCGM's metrics on --metrics-export-port; sent to the head for raygo_gpus_allocated_idle and the dashboard); 0 turns sampling off")
	fs.StringVar(&f.spotMetadataURL, "spot-metadata-url", os.Getenv("RAYGO_SPOT_METADATA_URL"), "instance metadata to watch for a spot interruption notice (EC2: http://169.254.169.254); on one the node drains itself with reason PREEMPTION and the notice's deadline, its bundles move and the autoscaler launches a replacement (default: RAYGO_SPOT_METADATA_URL, else none)")
	fs.StringVar(&f.gpuSim, "gpu-sim", "", "simulate this node's GPUs instead of asking NVML: one of "+strings.Join(gpusim.SimulatedModels(), ", "))
	fs.StringVar(&f.gpuRack, "gpu-sim-rack", "", "with --gpu-sim gb200-nvl72: the NVL72 rack (nodes of one rack share one multi-node NVLink domain); also sets the label "+nodelabel.Rack)
	fs.StringVar(&f.resources, "resources", "", `extra resources as a JSON object, e.g. '{"TPU": 4, "accelerator_x": 1}' (amounts >= 0)`)
	fs.StringVar(&f.numCPUs, "num-cpus", "", "CPUs this node offers (default: detected cores)")
	fs.StringVar(&f.numGPUs, "num-gpus", "", "GPUs this node offers (default: detected through NVML, 0 without a driver)")
	fs.StringVar(&f.objectStoreMemory, "object-store-memory", "", "bytes of Ray's object_store_memory resource this node offers, taken out of its memory resource (default: 30% of the node's memory, at most 200 GB, as Ray)")
	fs.StringVar(&f.labels, "labels", "", "node labels as k=v,k2=v2 (added to ray.io/node-id and ray.io/accelerator-type)")
}

// resolve validates the flags and returns the resource overrides and user labels.
func (f *nodeResourceFlags) resolve() (map[string]float64, map[string]string, error) {
	offered := map[string]float64{}
	if strings.TrimSpace(f.resources) != "" {
		var raw map[string]any
		if err := json.Unmarshal([]byte(f.resources), &raw); err != nil {
			return nil, nil, badInput("--resources: not a JSON object of resource name to number: %v", err)
		}
		for name, value := range raw {
			amount, ok := value.(float64)
			if !ok {
				return nil, nil, badInput("--resources: %q: amount must be a number, got %s", name, jsonText(value))
			}
			if name == resources.CPU || name == resources.GPU {
				return nil, nil, badInput("--resources: use --num-%ss instead of %q", strings.ToLower(name), name)
			}
			if name == resources.ObjectStoreMemory {
				return nil, nil, badInput("--resources: use --object-store-memory instead of %q", name)
			}
			if name == resources.HeadNode {
				return nil, nil, badInput("--resources: %q is a reserved resource name: the head node has it", name)
			}
			offered[name] = amount
		}
		if _, err := resources.ParseNodeResources(offered); err != nil {
			return nil, nil, badInput("--resources%v", err)
		}
	}
	if f.objectStoreMemory != "" {
		n, err := strconv.ParseFloat(f.objectStoreMemory, 64)
		if err != nil || math.IsNaN(n) || math.IsInf(n, 0) || n < 0 || n != math.Trunc(n) {
			return nil, nil, badInput("--object-store-memory %q: must be a whole number of bytes >= 0", f.objectStoreMemory)
		}
		offered[resources.ObjectStoreMemory] = n
	}
	for flagName, value := range map[string]string{"num-cpus": f.numCPUs, "num-gpus": f.numGPUs} {
		if value == "" {
			continue
		}
		n, err := strconv.ParseFloat(value, 64)
		if err != nil || math.IsNaN(n) || math.IsInf(n, 0) || n < 0 || n != math.Trunc(n) {
			return nil, nil, badInput("--%s %q: must be a whole number >= 0", flagName, value)
		}
		name := resources.CPU
		if flagName == "num-gpus" {
			name = resources.GPU
		}
		offered[name] = n
	}
	labels, err := parseLabels(f.labels)
	if err != nil {
		return nil, nil, err
	}
	if f.gpuSim != "" && !slices.Contains(gpusim.SimulatedModels(), f.gpuSim) {
		return nil, nil, badInput("--gpu-sim %q: must be one of %s", f.gpuSim, strings.Join(gpusim.SimulatedModels(), ", "))
	}
	if _, err := parseMIGFlag(f.mig, 0); err != nil {
		return nil, nil, err
	}
	if f.spotMetadataURL != "" {
		if u, err := url.Parse(f.spotMetadataURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, nil, badInput("--spot-metadata-url %q: must be an http:// or https:// URL", f.spotMetadataURL)
		}
	}
	if f.gpuActivityInterval < 0 {
		return nil, nil, badInput("--gpu-activity-interval %s: must not be negative (0 turns sampling off)", f.gpuActivityInterval)
	}
	if f.migIdle <= 0 {
		return nil, nil, badInput("--mig-idle-timeout %s: must be positive", f.migIdle)
	}
	if f.gpuRack != "" {
		if f.gpuSim == "" {
			return nil, nil, badInput("--gpu-sim-rack: needs --gpu-sim")
		}
		if _, set := labels[nodelabel.Rack]; !set {
			labels[nodelabel.Rack] = f.gpuRack
		}
	}
	return offered, labels, nil
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func parseLabels(s string) (map[string]string, error) {
	labels := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return labels, nil
	}
	for _, pair := range strings.Split(s, ",") {
		key, value, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || strings.TrimSpace(key) == "" {
			return nil, badInput("--labels %q: each label must be key=value", pair)
		}
		key = strings.TrimSpace(key)
		if key == nodelabel.NodeID {
			return nil, badInput("--labels: %q is set by raygo", key)
		}
		labels[key] = strings.TrimSpace(value)
	}
	if err := nodelabel.CheckLabels(labels); err != nil {
		return nil, badInput("--labels%v", err)
	}
	return labels, nil
}

// parseMIGFlag turns --mig into the GPU indices to run in MIG mode. With gpuCount 0 it
// only checks the syntax ("on" then means every GPU, whatever their number).
func parseMIGFlag(value string, gpuCount int) ([]int, error) {
	switch value {
	case "", "off":
		return nil, nil
	case "on":
		all := make([]int, gpuCount)
		for i := range all {
			all[i] = i
		}
		return all, nil
	}
	var indices []int
	for _, part := range strings.Split(value, ",") {
		index, mode, ok := strings.Cut(strings.TrimSpace(part), ":")
		n, err := strconv.Atoi(index)
		if !ok || err != nil || n < 0 || (mode != "on" && mode != "off") {
			return nil, badInput("--mig %q: must be on, off, or GPU:on|off,... (e.g. 0:on,1:on), got %q", value, part)
		}
		if gpuCount > 0 && n >= gpuCount {
			return nil, badInput("--mig %q: GPU %d: this node has GPUs 0-%d", value, n, gpuCount-1)
		}
		if mode == "on" {
			indices = append(indices, n)
		}
	}
	return indices, nil
}

// argsAfter returns args with every occurrence of the named flags (and their values)
// removed; start uses it to re-run itself in the background.
func argsWithout(args []string, names ...string) []string {
	drop := map[string]bool{}
	for _, n := range names {
		drop["-"+n], drop["--"+n] = true, true
	}
	var out []string
	for i := 0; i < len(args); i++ {
		name, _, hasValue := strings.Cut(args[i], "=")
		if drop[name] {
			if !hasValue && !isBoolFlag(name) && i+1 < len(args) {
				i++
			}
			continue
		}
		out = append(out, args[i])
	}
	return out
}

func isBoolFlag(name string) bool {
	switch strings.TrimLeft(name, "-") {
	case "head", "block":
		return true
	}
	return false
}

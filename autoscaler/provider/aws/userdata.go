package aws

import (
	"fmt"
	"maps"
	"path"
	"strings"

	"github.com/raygo-dev/raygo/autoscaler/provider"
	"github.com/raygo-dev/raygo/internal/auth"
	"github.com/raygo-dev/raygo/internal/nodelabel"
)

// MetadataURLEnv names the environment variable that, when set on the instance, replaces
// the instance metadata service's address (http://169.254.169.254) in the user data: a
// test runs the script with a metadata server on loopback.
const MetadataURLEnv = "RAYGO_METADATA_URL"

// NodeTokenPath is where the user data writes the node-scoped token (owner-only) and
// points RAYGO_AUTH_TOKEN_PATH at, for the instance's `raygo start`.
const NodeTokenPath = "/etc/raygo/node_token"

// instanceIDPlaceholder stands for the instance id in the node's labels until the
// script quotes them: the id is read from the metadata when the script runs, since the
// N instances of one launch share one user data.
const instanceIDPlaceholder = "@INSTANCE_ID@"

// userDataParams is what one launch's user data needs.
type userDataParams struct {
	ClusterName, NodeType, RequestID string
	// GCSAddress is HOST:PORT of the head's GCS the node joins.
	GCSAddress string
	// Raygo is the raygo command on the image ("raygo": found in PATH).
	Raygo string
	// Initialization and Setup are the commands run, in order, before raygo start.
	Initialization, Setup []string
	Resources             map[string]float64
	GPUModel              string
	Labels                map[string]string
	// Spot: the instances are spot instances; their raylet watches the instance
	// metadata for an interruption notice (--spot-metadata-url).
	Spot bool
	// NodeToken is the node-scoped token the node joins with ("" for none: the instance
	// finds one as any `raygo start` does).
	NodeToken string
}

// userData is the shell script every instance of a launch runs at boot (cloud-init runs
// a user data that starts with #!): it reads its instance id and private IPv4 from the
// instance metadata (IMDSv2: a session token first), runs the initialization and setup
// commands (set -e: a failing one stops the script, the node never joins and the
// autoscaler's start timeout terminates it), then execs a blocking `raygo start`
// joining the GCS, advertising the private IP, with the type's resources and labels
// and the instance id as label autoscaler.raygo.io/instance-id; a spot instance's
// watches the same metadata for an interruption notice. A node token is written to
// NodeTokenPath (umask 077) just before, for RAYGO_AUTH_TOKEN_PATH: it is in the user
// data, which whoever may describe the instance's attributes, and any process on the
// instance through the metadata service, can read; hence a node-scoped token, never the
// cluster token.
func userData(p userDataParams) (string, error) {
	labels := maps.Clone(p.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[nodelabel.InstanceID] = instanceIDPlaceholder
	labels[nodelabel.NodeType] = p.NodeType
	nodeArgs, err := provider.NodeArgs(p.Resources, p.GPUModel, labels)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\n# raygo node of cluster %s, type %s, launch request %s.\n", oneLine(p.ClusterName), oneLine(p.NodeType), oneLine(p.RequestID))
	b.WriteString(`set -e
metadata="${` + MetadataURLEnv + `:-http://169.254.169.254}"
token=$(curl -sf -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 600' "$metadata/latest/api/token")
meta() { curl -sf -H "X-aws-ec2-metadata-token: $token" "$metadata/latest/meta-data/$1"; }
instance_id=$(meta instance-id)
node_ip=$(meta local-ipv4)
`)
	if len(p.Initialization) > 0 {
		b.WriteString("# initialization_commands\n")
		for _, c := range p.Initialization {
			b.WriteString(c + "\n")
		}
	}
	if len(p.Setup) > 0 {
		b.WriteString("# setup_commands\n")
		for _, c := range p.Setup {
			b.WriteString(c + "\n")
		}
	}
	if p.NodeToken != "" {
		b.WriteString("# the node-scoped token the node joins with (not the cluster token)\n")
		fmt.Fprintf(&b, "umask 077\nmkdir -p %s\nprintf '%%s\\n' %s > %s\nexport %s=%s\n", shellQuote(path.Dir(NodeTokenPath)),
			shellQuote(p.NodeToken), shellQuote(NodeTokenPath), auth.EnvTokenPath, shellQuote(NodeTokenPath))
	}
	args := append([]string{p.Raygo, "start", "--address", p.GCSAddress, "--block", "--node-name", instanceIDPlaceholder}, nodeArgs...)
	b.WriteString("exec")
	for _, a := range args {
		b.WriteString(" " + strings.ReplaceAll(shellQuote(a), instanceIDPlaceholder, `'"$instance_id"'`))
	}
	b.WriteString(` --node-ip-address "$node_ip"`)
	if p.Spot {
		b.WriteString(` --spot-metadata-url "$metadata"`)
	}
	b.WriteString("\n")
	return b.String(), nil
}

// shellQuote quotes s for sh: single quotes, a single quote inside written '\”.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// oneLine keeps a value on its comment line.
func oneLine(s string) string { return strings.NewReplacer("\n", " ", "\r", " ").Replace(s) }

package nodelabel

import (
	"sort"

	"github.com/raygo-dev/raygo/internal/fielderr"
)

// MaxLabels bounds how many labels one node may carry.
const MaxLabels = 64

// CheckLabels checks a node's labels with the rules of selectors (Ray's and Kubernetes'):
// a key is an optional DNS-subdomain prefix and "/" then a name of 1-63 characters; a
// value is empty or such a name. The first bad label in key order is returned as a
// *fielderr.Error naming it (["zone"]), wrapping ErrInvalidLabel.
func CheckLabels(labels map[string]string) error {
	if len(labels) > MaxLabels {
		return fielderr.New(ErrInvalidLabel, "", "at most %d labels per node, got %d", MaxLabels, len(labels))
	}
	keys := make([]string, 0, len(labels))
	for key := range labels {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		if problem := keyProblem(key); problem != "" {
			return fielderr.New(ErrInvalidLabel, Field(key), "%s", problem)
		}
		if value := labels[key]; value != "" {
			if problem := valueProblem(value); problem != "" {
				return fielderr.New(ErrInvalidLabel, Field(key), "%s", problem)
			}
		}
	}
	return nil
}

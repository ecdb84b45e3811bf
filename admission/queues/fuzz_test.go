package queues

import (
	"errors"
	"os"
	"testing"

	"github.com/raygo-dev/raygo/internal/fielderr"
)

// FuzzLoad: any input either loads, and then resolves every namespace to a queue that
// exists, or is refused with a *fielderr.Error wrapping fielderr.ErrInvalid; never a panic.
func FuzzLoad(f *testing.F) {
	example, err := os.ReadFile("testdata/issue-example.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(example), "research-x")
	f.Add("queues: [{name: a, namespaces: [\"x*\"]}, {name: b, namespaces: [\"y\"]}]", "x1")
	f.Add("cohorts: [{name: c, parentName: p}]", "")
	f.Add("queues: [{name: a, cohortName: c, resources: {GPU: {nominalQuota: 1e300}}}]", "a")
	f.Fuzz(func(t *testing.T, data, namespace string) {
		c, err := Load([]byte(data))
		if err != nil {
			var fe *fielderr.Error
			if !errors.As(err, &fe) || !errors.Is(err, fielderr.ErrInvalid) {
				t.Fatalf("error %v is not a field error wrapping ErrInvalid", err)
			}
			return
		}
		if err := c.CheckQueue(c.QueueForNamespace(namespace)); err != nil {
			t.Fatalf("namespace %q resolves to a missing queue: %v", namespace, err)
		}
		for _, q := range c.Queues {
			for name, quota := range q.Quotas() {
				if quota.Nominal < 0 || quota.Borrowing < 0 || quota.Lending < 0 || quota.Lending > quota.Nominal {
					t.Fatalf("queue %s %s: bad quota %+v", q.Name, name, quota)
				}
			}
		}
	})
}

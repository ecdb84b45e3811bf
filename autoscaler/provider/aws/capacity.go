package aws

import (
	"sync"
	"time"
)

// UnavailableOfferingTTL is how long an offering stays unavailable after EC2 refused it
// for capacity (Karpenter's 3 minutes).
const UnavailableOfferingTTL = 3 * time.Minute

// offering is what EC2 runs out of: one market ("spot" or "on-demand") of one instance
// type in one availability zone ("" when the subnet's zone is not known).
type offering struct {
	Market, InstanceType, Zone string
}

// unavailableOfferings remembers offerings EC2 refused for capacity, each until its
// time. Safe for concurrent use.
type unavailableOfferings struct {
	mu    sync.Mutex
	until map[offering]time.Time
}

func (u *unavailableOfferings) mark(o offering, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.until == nil {
		u.until = map[offering]time.Time{}
	}
	u.until[o] = now.Add(UnavailableOfferingTTL)
}

// unavailable reports whether o was refused less than UnavailableOfferingTTL before now.
func (u *unavailableOfferings) unavailable(o offering, now time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	until, ok := u.until[o]
	if ok && !now.Before(until) {
		delete(u.until, o)
		return false
	}
	return ok
}

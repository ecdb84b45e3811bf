package aws

// EC2 error codes that mean "no capacity for this offering here, now": the offering
// (market, instance type, zone) is marked unavailable and the launch tries the next
// subnet. Karpenter's list of unfulfillable-capacity codes, the zonal ones.
var zonalCapacityCodes = map[string]bool{
	"InsufficientInstanceCapacity":         true, // on-demand (and spot) capacity of the type in the zone
	"InsufficientCapacity":                 true, // spot: no spot capacity
	"InsufficientHostCapacity":             true,
	"InsufficientReservedInstanceCapacity": true,
	"Unsupported":                          true, // the type is not offered in the zone
	"UnfulfillableCapacity":                true,
	"InsufficientFreeAddressesInSubnet":    true,
}

// EC2 error codes that mean the account has no room for the launch in any zone (a quota):
// the launch fails with provider.ErrCapacity at once, other subnets would refuse too.
var accountCapacityCodes = map[string]bool{
	"MaxSpotInstanceCountExceeded": true,
	"VcpuLimitExceeded":            true,
	"InstanceLimitExceeded":        true,
}

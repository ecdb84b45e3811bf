package resources

// Standard resource names, as Ray's.
const (
	CPU    = "CPU"
	GPU    = "GPU"
	Memory = "memory"
)

// Package resources is the resource vocabulary every part of raygo shares: exact amounts
// (multiples of 1/10000, as Ray's FixedPoint), resource sets with their arithmetic and fit
// checks, the standard names, and the one validation of what a placement-group bundle, a
// task or actor, and a node may ask or offer. The GCS, the raylet, the SDK and the
// scheduler all parse wire resources here, so a rule is written once; the Python client
// mirrors the same rules (pyclient/raygo/_resources.py) and a test keeps the two in step.
//
// It does no I/O and holds no state.
package resources

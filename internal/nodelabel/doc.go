// Package nodelabel is the node-label vocabulary raygo shares: the well-known keys
// (ray.io/*, topology.raygo.io/*), and label selectors in Ray's syntax ("a", "in(a,b)",
// "!a", "!in(a,b)") with their validation. It does no I/O and holds no state.
package nodelabel

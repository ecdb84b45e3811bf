package resources

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/raygo-dev/raygo/internal/fielderr"
)

// AmountScale is the number of Amount units in one unit of a resource: amounts are
// multiples of 1/10000, as Ray's FixedPoint (RESOURCE_UNIT_SCALING).
const AmountScale = 10000

// MaxNameBytes is the longest resource name accepted.
const MaxNameBytes = 256

// maxAmountFloat is the largest value AmountFromFloat accepts: the int64 range divided
// by AmountScale (about 9.2e14, e.g. 920 TB of memory in bytes).
const maxAmountFloat = float64(math.MaxInt64/AmountScale) - 1

// MaxAmount is the largest amount of one resource, in one bundle, node or sum of them:
// the most AmountFromFloat returns (computed as it computes, in float64). Sums that would
// pass it are refused (SumOf), so no arithmetic on amounts wraps around.
var MaxAmount = Amount(math.Round(float64(maxAmountFloat) * AmountScale))

// Amount is a resource quantity in units of 1/AmountScale. Integer arithmetic keeps sums
// of fractional bundles exact: 10000 bundles of 0.0001 GPU add up to exactly 1 GPU.
type Amount int64

// AmountFromFloat converts a wire amount, rounding to the nearest 1/AmountScale. It
// rejects negative, NaN, infinite and too large values with an error naming the value.
func AmountFromFloat(value float64) (Amount, error) {
	if math.IsNaN(value) || math.IsInf(value, 0) || value < 0 {
		return 0, fielderr.New(ErrInvalidAmount, "", "amount must be a finite number >= 0, got %s", formatFloat(value))
	}
	if value > maxAmountFloat {
		return 0, fielderr.New(ErrInvalidAmount, "", "amount must be at most %.0f, got %s", maxAmountFloat, formatFloat(value))
	}
	return Amount(math.Round(value * AmountScale)), nil
}

// Float returns the amount in resource units (nearest float64).
func (a Amount) Float() float64 { return float64(a) / AmountScale }

// String prints the exact decimal value without trailing zeros: "8", "0.5", "1.0001".
func (a Amount) String() string {
	sign := ""
	magnitude := uint64(a)
	if a < 0 {
		sign = "-"
		magnitude = uint64(-(a + 1)) + 1 // no overflow for math.MinInt64
	}
	whole := strconv.FormatUint(magnitude/AmountScale, 10)
	fraction := magnitude % AmountScale
	if fraction == 0 {
		return sign + whole
	}
	digits := strconv.FormatUint(fraction+AmountScale, 10)[1:] // zero-padded to 4 digits
	return sign + whole + "." + strings.TrimRight(digits, "0")
}

func formatFloat(value float64) string { return strconv.FormatFloat(value, 'g', -1, 64) }

// Set maps resource names ("CPU", "GPU", "memory", custom names) to amounts.
// A missing name means zero. Methods never modify the receiver.
type Set map[string]Amount

// SetFromFloat converts a wire resource map, checking every name and amount.
// Errors name the key, e.g. `["GPU"]: amount must be a finite number >= 0, got -1`;
// callers prefix the field path (`bundles[0]`). Keys are checked in sorted order so the
// error is deterministic.
func SetFromFloat(amounts map[string]float64) (Set, error) {
	set := make(Set, len(amounts))
	for _, name := range slices.Sorted(maps.Keys(amounts)) {
		if err := CheckName(name); err != nil {
			return nil, err
		}
		amount, err := AmountFromFloat(amounts[name])
		if err != nil {
			return nil, fielderr.WithPrefix(err, Field(name))
		}
		set[name] = amount
	}
	return set, nil
}

// ToFloat converts back to the wire form.
func (r Set) ToFloat() map[string]float64 {
	out := make(map[string]float64, len(r))
	for name, amount := range r {
		out[name] = amount.Float()
	}
	return out
}

// Clone returns a copy that shares nothing with r.
func (r Set) Clone() Set {
	out := make(Set, len(r))
	for name, amount := range r {
		out[name] = amount
	}
	return out
}

// Add returns r + other. Names whose sum is zero are left out.
func (r Set) Add(other Set) Set {
	out := make(Set, len(r)+len(other))
	for name, amount := range r {
		out[name] = amount
	}
	for name, amount := range other {
		out[name] += amount
	}
	dropZeros(out)
	return out
}

// Subtract returns r - other, or an error wrapping ErrInsufficientResources that names
// the first resource (in name order) that would go below zero. Names whose difference is
// zero are left out.
func (r Set) Subtract(other Set) (Set, error) {
	for _, name := range other.Names() {
		if r[name] < other[name] {
			return nil, fielderr.New(ErrInsufficientResources, Field(name), "cannot subtract %s from %s", other[name], r[name])
		}
	}
	out := r.Clone()
	for name, amount := range other {
		out[name] -= amount
	}
	dropZeros(out)
	return out, nil
}

// IsSubsetOf reports whether r fits in other: every amount of r is at most other's
// amount of the same resource (missing counts as zero).
func (r Set) IsSubsetOf(other Set) bool {
	for name, amount := range r {
		if amount > other[name] {
			return false
		}
	}
	return true
}

// IsZero reports whether every amount is zero (true for an empty or nil set).
func (r Set) IsZero() bool {
	for _, amount := range r {
		if amount != 0 {
			return false
		}
	}
	return true
}

// Equal reports whether r and other hold the same amounts, missing counting as zero.
func (r Set) Equal(other Set) bool {
	for name, amount := range r {
		if other[name] != amount {
			return false
		}
	}
	for name, amount := range other {
		if r[name] != amount {
			return false
		}
	}
	return true
}

// Names returns the resource names in sorted order.
func (r Set) Names() []string { return slices.Sorted(maps.Keys(r)) }

// String prints the set with sorted names: "{CPU: 8, GPU: 0.5}".
func (r Set) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, name := range r.Names() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(name)
		b.WriteString(": ")
		b.WriteString(r[name].String())
	}
	b.WriteByte('}')
	return b.String()
}

func dropZeros(set Set) {
	for name, amount := range set {
		if amount == 0 {
			delete(set, name)
		}
	}
}

// CheckName applies Ray's limits on resource names.
func CheckName(name string) error {
	if name == "" {
		return fielderr.New(ErrInvalidResourceName, Field(name), "resource name must not be empty")
	}
	if len(name) > MaxNameBytes {
		return fielderr.New(ErrInvalidResourceName, Field(name),
			"resource name must be at most %d bytes, got %d", MaxNameBytes, len(name))
	}
	return nil
}

// CheckSet checks names and that no amount is negative (an Amount built
// directly, not through AmountFromFloat, can be). Schedule runs it on every request, so
// names are sorted (to report the first problem deterministically) only when one exists.
func CheckSet(set Set) error {
	valid := true
	for name, amount := range set {
		valid = valid && name != "" && len(name) <= MaxNameBytes && amount >= 0
	}
	if valid {
		return nil
	}
	for _, name := range set.Names() {
		if err := CheckName(name); err != nil {
			return err
		}
		if set[name] < 0 {
			return fielderr.New(ErrInvalidAmount, Field(name), "amount must be a finite number >= 0, got %s", set[name])
		}
	}
	return nil
}

// Field is the field path of one resource in a map: ["GPU"]. Overlong names are
// cut so the message stays readable.
func Field(name string) string {
	const maxShown = 40
	if len(name) > maxShown {
		return "[" + strconv.Quote(name[:maxShown]+"…") + "]"
	}
	return "[" + strconv.Quote(name) + "]"
}

// SumOf adds sets up, resource by resource, and fails (wrapping ErrInvalidAmount, naming
// the resource) when a total would pass MaxAmount: one group asking for more of a
// resource than any cluster could hold must be refused, not wrap around to a negative
// amount that fits everywhere.
func SumOf(sets []Set) (Set, error) {
	sum := Set{}
	for _, set := range sets {
		for name, amount := range set {
			if amount > MaxAmount-sum[name] {
				return sumOfSorted(sets) // names the resource deterministically
			}
			sum[name] += amount
		}
	}
	dropZeros(sum)
	return sum, nil
}

// sumOfSorted is SumOf with each set's names in order, for its error.
func sumOfSorted(sets []Set) (Set, error) {
	sum := Set{}
	for _, set := range sets {
		for _, name := range set.Names() {
			if amount := set[name]; amount > MaxAmount-sum[name] {
				return nil, fielderr.New(ErrInvalidAmount, Field(name), "the total over all bundles must be at most %.0f, got more", maxAmountFloat)
			}
			sum[name] += set[name]
		}
	}
	dropZeros(sum)
	return sum, nil
}

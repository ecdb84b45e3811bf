package queues

import (
	"fmt"
	"math"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// Duration is a span of time in nanoseconds (the unit of Go's time.Duration, so a
// caller converts with time.Duration(d)). In YAML it is written as Kubernetes and Go
// write durations: "30s", "10m", "1h30m", "500ms", or 0. The package reads no clock;
// callers compare durations with the times they pass in, in nanoseconds.
type Duration int64

// Units of Duration.
const (
	Nanosecond  Duration = 1
	Microsecond          = 1000 * Nanosecond
	Millisecond          = 1000 * Microsecond
	Second               = 1000 * Millisecond
	Minute               = 60 * Second
	Hour                 = 60 * Minute
)

var durationUnits = map[string]Duration{
	"ns": Nanosecond, "us": Microsecond, "µs": Microsecond, "ms": Millisecond,
	"s": Second, "m": Minute, "h": Hour,
}

// ParseDuration reads "1h30m", "45s", "250ms" or "0". Negative or unitless durations
// (other than 0) and durations above about 292 years are refused.
func ParseDuration(text string) (Duration, error) {
	if text == "0" {
		return 0, nil
	}
	if text == "" {
		return 0, fmt.Errorf("must be a duration such as 30s, 10m or 1h30m, got an empty string")
	}
	var total float64
	rest := text
	for rest != "" {
		i := 0
		for i < len(rest) && (rest[i] == '.' || ('0' <= rest[i] && rest[i] <= '9')) {
			i++
		}
		j := i
		for j < len(rest) && !(rest[j] == '.' || ('0' <= rest[j] && rest[j] <= '9')) {
			j++
		}
		number, unit := rest[:i], rest[i:j]
		value, err := strconv.ParseFloat(number, 64)
		scale, known := durationUnits[unit]
		if i == 0 || err != nil || !known {
			return 0, fmt.Errorf("must be a duration such as 30s, 10m or 1h30m (units ns, us, ms, s, m, h), got %q", text)
		}
		total += value * float64(scale)
		rest = rest[j:]
	}
	if total >= math.MaxInt64 {
		return 0, fmt.Errorf("duration %q is too long", text)
	}
	return Duration(total), nil
}

// String writes the duration the way ParseDuration reads it.
func (d Duration) String() string {
	if d == 0 {
		return "0s"
	}
	out := ""
	for _, u := range []struct {
		name  string
		scale Duration
	}{{"h", Hour}, {"m", Minute}, {"s", Second}, {"ms", Millisecond}, {"us", Microsecond}, {"ns", Nanosecond}} {
		if d >= u.scale {
			out += strconv.FormatInt(int64(d/u.scale), 10) + u.name
			d %= u.scale
		}
	}
	return out
}

// UnmarshalYAML reads a duration scalar. Load has already checked it with the field's
// path (checkKnownFields), so the error here is a fallback.
func (d *Duration) UnmarshalYAML(node *yaml.Node) error {
	parsed, err := ParseDuration(node.Value)
	if err != nil {
		return err
	}
	*d = parsed
	return nil
}

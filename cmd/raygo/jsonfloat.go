package main

import (
	"encoding/json"
	"math"
)

// jsonFloat is a float64 in `--format json` output: NaN and ±Inf, which JSON cannot
// hold, are written as null instead of failing the whole listing. The GCS refuses them,
// but a row written by an older version, or by a bug, must not make the table unreadable.
type jsonFloat float64

func (f jsonFloat) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(f))
}

// jsonFloats converts a resource map for JSON output (never nil: Ray's state API writes {}).
func jsonFloats(in map[string]float64) map[string]jsonFloat {
	out := make(map[string]jsonFloat, len(in))
	for k, v := range in {
		out[k] = jsonFloat(v)
	}
	return out
}

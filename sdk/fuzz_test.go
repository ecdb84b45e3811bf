package sdk

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// fuzzArgs is a task with the argument kinds workers decode: numbers, text, slices, maps,
// pointers and structs.
type fuzzArgs struct {
	Name  string
	Sizes []int
	Next  *fuzzArgs
}

func fuzzTarget(_ context.Context, n int64, s string, f []float64, m map[string]uint8, p *fuzzArgs) (int, error) {
	return len(s) + len(f) + len(m), nil
}

// FuzzWorkerArgumentDecoding: whatever bytes a worker receives as arguments, it answers
// with the function's result or an ArgumentError naming the argument; it never panics.
func FuzzWorkerArgumentDecoding(f *testing.F) {
	fn, err := newFunction("fuzz", reflect.ValueOf(fuzzTarget), false)
	if err != nil {
		f.Fatal(err)
	}
	valid, err := fn.encodeArgs("fuzz", []any{int64(7), "x", []float64{1.5}, map[string]uint8{"a": 1}, &fuzzArgs{Name: "n", Sizes: []int{1}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid[0], valid[1], valid[2], valid[3], valid[4])
	f.Add([]byte{0xc1}, []byte{}, []byte{0xdd, 0xff, 0xff, 0xff, 0xff}, []byte{0xdf, 0x7f, 0xff, 0xff, 0xff}, []byte{0x81, 0xa4, 'N', 'e', 'x', 't', 0x81})
	f.Fuzz(func(t *testing.T, a, b, c, d, e []byte) {
		_, encoded, taskErr := fn.call(context.Background(), reflect.Value{}, [][]byte{a, b, c, d, e})
		switch {
		case taskErr != nil && taskErr.Type != "*sdk.ArgumentError":
			t.Fatalf("task error %q: %s, want an ArgumentError", taskErr.Type, taskErr.Message)
		case taskErr == nil:
			var n int
			if err := msgpack.Unmarshal(encoded, &n); err != nil {
				t.Fatalf("the result does not decode: %v", err)
			}
		}
	})
}

func TestEncodedLengthsBeyondTheBytesAreRefusedBeforeDecoding(t *testing.T) {
	for _, v := range []any{nil, true, -1, 1 << 40, 3.5, float32(2), "text", []byte("bin"), []int{1, 2, 3},
		map[string][]string{"a": {"b"}}, fuzzArgs{Name: "x", Sizes: make([]int, 300), Next: &fuzzArgs{}}, msgpackExtTime()} {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkEncodedLengths(b); err != nil {
			t.Fatalf("%T %v: %v", v, v, err)
		}
	}
	for name, b := range map[string][]byte{
		"array32 of 2^32-1":   {0xdd, 0xff, 0xff, 0xff, 0xff},
		"map32 of 2^31":       {0xdf, 0x80, 0, 0, 0},
		"str32 past the end":  {0xdb, 0, 0, 1, 0, 'a'},
		"array of 3 with 2":   {0x93, 0x01, 0x02},
		"never-used tag 0xc1": {0xc1},
		"nothing":             {},
	} {
		if err := checkEncodedLengths(b); err == nil {
			t.Fatalf("%s: accepted", name)
		}
	}
}

func msgpackExtTime() any { return time.Unix(1_700_000_000, 5) }

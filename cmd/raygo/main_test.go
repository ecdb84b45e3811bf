package main

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A server's refusal reaches the user as its own message, without gRPC's
// "rpc error: code = … desc =" in front.
func TestErrorsFromTheGCSAreOneLineWithoutGRPCsPrefix(t *testing.T) {
	var stderr strings.Builder
	err := status.Error(codes.Unauthenticated, "this raygo cluster requires its token\nand the call carried none")
	if code := exitCode(fmt.Errorf("read the node table: %w", err), &stderr); code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
	if got, want := stderr.String(), "raygo: read the node table: this raygo cluster requires its token and the call carried none\n"; got != want {
		t.Fatalf("stderr %q, want %q", got, want)
	}
}

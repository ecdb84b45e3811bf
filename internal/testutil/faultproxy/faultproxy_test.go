package faultproxy_test

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/raygo-dev/raygo/internal/testutil/faultproxy"
)

// echoServer echoes every connection until it closes.
func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(conn, conn); _ = conn.Close() }()
		}
	}()
	return l.Addr().String()
}

func start(t *testing.T, target string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.Start(target, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// roundTrip writes payload and reads it back whole.
func roundTrip(t *testing.T, conn net.Conn, payload []byte) {
	t.Helper()
	if err := conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := conn.Write(payload); done <- err }()
	got := make([]byte, len(payload))
	if _, err := io.ReadFull(conn, got); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatal("the bytes came back changed or out of order")
	}
}

// Under heavy loss and delay every byte still arrives, in order: loss only delays.
func TestLossAndDelayKeepTheStreamWhole(t *testing.T) {
	p := start(t, echoServer(t))
	p.SetFaults(faultproxy.Faults{Delay: time.Millisecond, Loss: 0.5})
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	payload := make([]byte, 1<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range payload {
		payload[i] = byte(rng.IntN(256))
	}
	roundTrip(t, conn, payload)
}

// A delay is added in each direction: a round trip takes at least twice it. Without
// faults the same connection goes on. (A lower bound only: a slow machine can only make
// it longer.)
func TestDelayAppliesToEachDirection(t *testing.T) {
	p := start(t, echoServer(t))
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	roundTrip(t, conn, []byte("warm"))
	const delay = 150 * time.Millisecond
	p.SetFaults(faultproxy.Faults{Delay: delay})
	began := time.Now()
	roundTrip(t, conn, []byte("ping"))
	if took := time.Since(began); took < 2*delay {
		t.Fatalf("round trip took %v with a %v delay each way", took, delay)
	}
	p.SetFaults(faultproxy.Faults{})
	roundTrip(t, conn, []byte("again"))
}

// Close ends the connections it carries.
func TestCloseEndsConnections(t *testing.T) {
	p := start(t, echoServer(t))
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	roundTrip(t, conn, []byte("x"))
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Fatal("a read after Close succeeded")
	}
}

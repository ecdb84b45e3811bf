// Package faultproxy is a TCP proxy on loopback that adds delay and loss to the byte
// streams it forwards, in user space: the kernel's netem qdisc is not available on every
// machine the tests run on. A test points a client at Proxy.Addr instead of the server
// and turns faults on and off while the connections stay up.
//
// TCP hides a lost segment from the application: it arrives late, after the sender's
// retransmission timeout, and everything behind it on the connection waits for it. So
// "loss" here holds a chunk for RetransmitTimeout (plus the delay), and the chunks behind
// it in the same direction are never delivered before it.
package faultproxy

import (
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// RetransmitTimeout is what a lost chunk waits: Linux's minimum TCP retransmission
// timeout (TCP_RTO_MIN, 200 ms).
const RetransmitTimeout = 200 * time.Millisecond

// Faults are what the proxy does to each chunk it forwards, in both directions.
type Faults struct {
	// Delay is added to every chunk.
	Delay time.Duration
	// Loss is the probability, 0..1, that a chunk is lost once and retransmitted
	// (RetransmitTimeout later).
	Loss float64
}

// Proxy forwards connections accepted on Addr to a target address.
type Proxy struct {
	listener net.Listener
	target   string

	mu     sync.Mutex
	faults Faults
	rng    *rand.Rand
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Start listens on a free loopback port and forwards to target; seed seeds the losses.
func Start(target string, seed uint64) (*Proxy, error) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{listener: listener, target: target, rng: rand.New(rand.NewPCG(seed, 0xfa17)), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients dial.
func (p *Proxy) Addr() string { return p.listener.Addr().String() }

// SetFaults changes the faults; chunks read from now on get them.
func (p *Proxy) SetFaults(f Faults) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = f
}

// Close stops accepting, closes every connection and waits for the proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for conn := range p.conns {
		_ = conn.Close()
	}
	p.mu.Unlock()
	err := p.listener.Close()
	p.wg.Wait()
	return err
}

// track records conn so that Close closes it; false once the proxy is closed.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, conn := range conns {
		p.conns[conn] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, conn := range conns {
		delete(p.conns, conn)
		_ = conn.Close()
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.listener.Accept()
		if err != nil {
			return
		}
		server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			_ = client.Close()
			continue
		}
		if !p.track(client, server) {
			_ = client.Close()
			_ = server.Close()
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			var pumps sync.WaitGroup
			pumps.Add(2)
			go func() { defer pumps.Done(); p.pump(server, client) }()
			go func() { defer pumps.Done(); p.pump(client, server) }()
			pumps.Wait()
			p.untrack(client, server)
		}()
	}
}

// due is when a chunk read now may be delivered, never before the previous one.
func (p *Proxy) due(now, previous time.Time) time.Time {
	p.mu.Lock()
	f := p.faults
	lost := f.Loss > 0 && p.rng.Float64() < f.Loss
	p.mu.Unlock()
	at := now.Add(f.Delay)
	if lost {
		at = at.Add(RetransmitTimeout)
	}
	if at.Before(previous) {
		return previous
	}
	return at
}

type chunk struct {
	data []byte
	due  time.Time
}

// pump copies from src to dst, each chunk delivered at its due time. When either side
// ends, both connections are closed, which ends the other direction too.
func (p *Proxy) pump(dst, src net.Conn) {
	defer func() { _ = dst.Close(); _ = src.Close() }()
	queue := make(chan chunk, 256)
	go func() {
		defer close(queue)
		var previous time.Time
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				c := chunk{data: buf[:n], due: p.due(time.Now(), previous)}
				previous = c.due
				queue <- c
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range queue {
		if wait := time.Until(c.due); wait > 0 {
			time.Sleep(wait)
		}
		if _, err := dst.Write(c.data); err != nil {
			_ = src.Close()
			for range queue { // let the reader finish
			}
			return
		}
	}
}

// Package ec2proxy is an HTTP proxy in front of an EC2 endpoint (moto_server in the
// tests) that injects EC2's failures: it answers a matching request with an EC2 error
// response, or forwards it and answers late (a launch that times out after EC2 created
// the instances). Every other request is forwarded as is.
//
// EC2's query API is a form-encoded POST (Action=RunInstances&InstanceType=…); its
// errors are XML, <Response><Errors><Error><Code>…</Code><Message>…</Message></Error>
// </Errors><RequestID>…</RequestID></Response>, which the SDK reads whatever the HTTP
// status. The status is 503 for RequestLimitExceeded (the SDK retries it, as a
// throttle), 400 otherwise.
package ec2proxy

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"
)

// Fault is one injected failure. Empty match fields match any request.
type Fault struct {
	// Action is the EC2 action matched (default "RunInstances").
	Action string
	// InstanceType, SubnetID and Market ("spot" or "on-demand") match RunInstances'
	// parameters.
	InstanceType, SubnetID, Market string
	// Code and Message are the error answered, e.g. "InsufficientInstanceCapacity". With
	// Code "" the request is forwarded, and answered after Delay.
	Code, Message string
	Delay         time.Duration
	// Times is how many matching requests the fault applies to (0: every one).
	Times int
}

// Proxy is an EC2 endpoint on loopback that forwards to another. Safe for concurrent
// use.
type Proxy struct {
	// URL is the proxy's endpoint (http://127.0.0.1:PORT).
	URL     string
	forward *httputil.ReverseProxy

	mu     sync.Mutex
	faults []*Fault
	seen   map[string]int
}

// Start runs a proxy to target (an endpoint URL) until the test ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{forward: httputil.NewSingleHostReverseProxy(u), seen: map[string]int{}}
	server := httptest.NewServer(p)
	t.Cleanup(server.Close)
	p.URL = server.URL
	return p
}

// Inject adds a fault; the first matching fault of the list applies.
func (p *Proxy) Inject(f Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f.Action == "" {
		f.Action = "RunInstances"
	}
	p.faults = append(p.faults, &f)
}

// Clear removes every fault.
func (p *Proxy) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = nil
}

// Requests is how many requests of the action the proxy received.
func (p *Proxy) Requests(action string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[action]
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	form, _ := url.ParseQuery(string(body))
	fault := p.match(form)
	if fault == nil {
		p.forward.ServeHTTP(w, r)
		return
	}
	if fault.Code != "" {
		status := http.StatusBadRequest
		if fault.Code == "RequestLimitExceeded" {
			status = http.StatusServiceUnavailable
		}
		w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
		w.WriteHeader(status)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>ec2proxy-%d</RequestID></Response>`,
			html.EscapeString(fault.Code), html.EscapeString(fault.Message), time.Now().UnixNano())
		return
	}
	late := httptest.NewRecorder()
	p.forward.ServeHTTP(late, r)
	select {
	case <-time.After(fault.Delay):
	case <-r.Context().Done():
		return
	}
	for k, v := range late.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(late.Code)
	_, _ = w.Write(late.Body.Bytes())
}

// match counts the request and returns the fault that applies to it, or nil.
func (p *Proxy) match(form url.Values) *Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	action := form.Get("Action")
	p.seen[action]++
	market := form.Get("InstanceMarketOptions.MarketType")
	if market == "" {
		market = "on-demand"
	}
	for i, f := range p.faults {
		if f.Action != action ||
			(f.InstanceType != "" && f.InstanceType != form.Get("InstanceType")) ||
			(f.SubnetID != "" && f.SubnetID != form.Get("SubnetId")) ||
			(f.Market != "" && f.Market != market) {
			continue
		}
		if f.Times > 0 {
			f.Times--
			if f.Times == 0 {
				p.faults = append(p.faults[:i:i], p.faults[i+1:]...)
			}
		}
		return f
	}
	return nil
}

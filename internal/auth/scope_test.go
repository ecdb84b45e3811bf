package auth

import (
	"context"
	"testing"
)

func TestParseScope(t *testing.T) {
	for _, tc := range []struct {
		text string
		want Scope
		ok   bool
	}{
		{"admin", Scope{Kind: ScopeAdmin}, true},
		{"node", Scope{Kind: ScopeNode}, true},
		{"queue:team-a", Scope{Kind: ScopeQueue, Name: "team-a"}, true},
		{"namespace:research", Scope{Kind: ScopeNamespace, Name: "research"}, true},
		{"admin:x", Scope{}, false},
		{"queue:", Scope{}, false},
		{"queue", Scope{}, false},
		{"namespace:a b", Scope{}, false},
		{"root", Scope{}, false},
		{"", Scope{}, false},
	} {
		got, err := ParseScope(tc.text)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseScope(%q) = %v, %v; want %v (ok %v)", tc.text, got, err, tc.want, tc.ok)
		}
		if tc.ok && got.String() != tc.text {
			t.Errorf("ParseScope(%q).String() = %q", tc.text, got.String())
		}
	}
}

func TestClusterTokenVerifierAndScopeInContext(t *testing.T) {
	if ClusterToken("") != nil {
		t.Error("an empty cluster token must verify nothing (auth disabled)")
	}
	verify := ClusterToken("s3cret")
	if scope, ok := verify("s3cret"); !ok || scope != Admin {
		t.Errorf("the cluster token: %v %v, want admin", scope, ok)
	}
	if _, ok := verify("s3cre"); ok {
		t.Error("a wrong token was accepted")
	}
	if ScopeFrom(context.Background()) != Admin {
		t.Error("a call without a scope (auth off) must be admin")
	}
	tenant := Scope{Kind: ScopeQueue, Name: "a"}
	if got := ScopeFrom(WithScope(context.Background(), tenant)); got != tenant || !got.IsTenant() {
		t.Errorf("ScopeFrom(WithScope(%v)) = %v", tenant, got)
	}
	if HashToken("x") == HashToken("y") || !EqualHash(HashToken("x"), HashToken("x")) {
		t.Error("HashToken/EqualHash")
	}
}

func TestClusterTokenHashAcceptsTheClusterTokenByHashAndItsOwn(t *testing.T) {
	var learned LearnedHashes
	verify := ClusterTokenHash(&learned, "node-token")
	for _, presented := range []string{"cluster-token", "gcs-credential"} {
		if _, ok := verify(presented); ok {
			t.Errorf("%s accepted before its hash is known", presented)
		}
	}
	if scope, ok := verify("node-token"); !ok || scope.Kind != ScopeNode {
		t.Errorf("its own token: %v %v, want accepted as node", scope, ok)
	}
	known, gcs := HashToken("cluster-token"), HashToken("gcs-credential")
	learned.ClusterToken.Store(&known)
	learned.GCSCredential.Store(&gcs)
	if scope, ok := verify("cluster-token"); !ok || scope != Admin {
		t.Errorf("the cluster token by hash: %v %v, want admin", scope, ok)
	}
	if scope, ok := verify("gcs-credential"); !ok || scope.Kind != ScopeGCS {
		t.Errorf("the GCS's credential by hash: %v %v, want the gcs scope", scope, ok)
	}
	for _, presented := range []string{"", "tenant-token", known, gcs} {
		if _, ok := verify(presented); ok {
			t.Errorf("%q accepted", presented)
		}
	}
}

func TestTheGCSScopeIsNeverIssued(t *testing.T) {
	if scope, err := ParseScope("gcs"); err == nil {
		t.Errorf("ParseScope(gcs) = %v, want an error: the GCS's credential is not a token anyone is issued", scope)
	}
}

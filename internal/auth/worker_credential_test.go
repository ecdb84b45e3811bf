package auth

import "testing"

// A worker's credential is the same for the GCS and its raylet (both derive it), differs
// per worker and per GCS credential, and is neither the key nor a hash of the id.
func TestWorkerCredentialIsPerWorkerAndPerGCS(t *testing.T) {
	key, other := HashToken("gcs credential"), HashToken("another gcs credential")
	a := WorkerCredential(key, "worker-a")
	if a != WorkerCredential(key, "worker-a") {
		t.Error("not deterministic")
	}
	for name, got := range map[string]string{
		"another worker":         WorkerCredential(key, "worker-b"),
		"another GCS credential": WorkerCredential(other, "worker-a"),
		"the key":                key,
		"the id's hash":          HashToken("worker-a"),
	} {
		if got == a {
			t.Errorf("worker-a's credential equals %s's", name)
		}
	}
	if len(a) != 64 {
		t.Errorf("credential %q: want 64 hex digits", a)
	}
}

package auth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadLooksInTheEnvironmentThenTheFiles(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv(EnvToken, "")
	t.Setenv(EnvTokenPath, "")
	if token, err := Load(); token != "" || err != nil {
		t.Fatalf("nothing anywhere: %q %v, want none", token, err)
	}
	if err := Save(DefaultTokenPath(), "from-home"); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(filepath.Join(home, ".raygo")); err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("~/.raygo: %v %v, want mode 700", info.Mode(), err)
	}
	if info, err := os.Stat(DefaultTokenPath()); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("~/.raygo/auth_token: %v %v, want mode 600", info.Mode(), err)
	}
	if token, err := Load(); token != "from-home" || err != nil {
		t.Fatalf("~/.raygo/auth_token: %q %v", token, err)
	}
	other := filepath.Join(t.TempDir(), "token")
	if err := Save(other, "from-path"); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvTokenPath, other)
	if token, err := Load(); token != "from-path" || err != nil {
		t.Fatalf("%s: %q %v", EnvTokenPath, token, err)
	}
	t.Setenv(EnvToken, "from-env")
	if token, err := Load(); token != "from-env" || err != nil {
		t.Fatalf("%s: %q %v", EnvToken, token, err)
	}
}

func TestLoadRefusesAFileOthersCanRead(t *testing.T) {
	t.Setenv(EnvToken, "")
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("t\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvTokenPath, path)
	if _, err := Load(); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a token file of mode 644: %v, want an error saying chmod 600", err)
	}
	t.Setenv(EnvTokenPath, filepath.Join(t.TempDir(), "absent"))
	if _, err := Load(); err == nil || !strings.Contains(err.Error(), EnvTokenPath) {
		t.Fatalf("%s naming no file: %v, want an error naming it", EnvTokenPath, err)
	}
}

func TestModeFor(t *testing.T) {
	cases := []struct {
		env, host string
		want      Mode
		explicit  bool
		bad       bool
	}{
		{"", "127.0.0.1", ModeDisabled, false, false},
		{"", "::1", ModeDisabled, false, false},
		{"", "localhost", ModeDisabled, false, false},
		{"", "10.0.0.5", ModeToken, false, false},
		{"", "0.0.0.0", ModeToken, false, false},
		{"token", "127.0.0.1", ModeToken, true, false},
		{"disabled", "10.0.0.5", ModeDisabled, true, false},
		{"on", "10.0.0.5", "", false, true},
	}
	for _, tc := range cases {
		t.Setenv(EnvMode, tc.env)
		mode, explicit, err := ModeFor(tc.host)
		if tc.bad {
			if err == nil || !strings.Contains(err.Error(), EnvMode) {
				t.Errorf("%s=%q: %v, want an error naming it", EnvMode, tc.env, err)
			}
			continue
		}
		if mode != tc.want || explicit != tc.explicit || err != nil {
			t.Errorf("%s=%q on %s: %s %v %v, want %s %v", EnvMode, tc.env, tc.host, mode, explicit, err, tc.want, tc.explicit)
		}
	}
}

func TestGeneratedTokensDifferAndCompare(t *testing.T) {
	a, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Generate()
	if len(a) != 64 || a == b {
		t.Fatalf("tokens %q and %q", a, b)
	}
	if !Equal(a, a) || Equal(a, b) || Equal(a, "") {
		t.Fatal("Equal")
	}
}

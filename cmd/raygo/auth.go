package main

import (
	"fmt"
	"io"
	"os"

	"github.com/raygo-dev/raygo/internal/auth"
)

// resolveAuth turns auth on or off for a node served on nodeIP (auth.ModeFor: on unless
// loopback, RAYGO_AUTH_MODE decides when set) and, when on, finds the cluster token — a
// head with none generates one and saves it (as `ray start` does) — and puts mode and
// token in this process's environment, which the node's daemons, and through the raylet
// its workers, inherit. Auth turned off on a non-loopback address gets a warning.
func resolveAuth(nodeIP string, head, generate bool, stderr io.Writer) error {
	token, on, explicit, err := nodeToken(nodeIP)
	if err != nil {
		return err
	}
	if !on {
		if explicit && !auth.IsLoopback(nodeIP) {
			fmt.Fprintf(stderr, "raygo: warning: auth is disabled (%s=disabled) on %s: anyone who reaches its ports can run code on it and take its GPUs\n", auth.EnvMode, nodeIP)
		}
		return os.Setenv(auth.EnvMode, string(auth.ModeDisabled))
	}
	if token == "" {
		if !head {
			return badInput("auth is on for %s but this machine has no cluster token: %s", nodeIP, auth.Hint)
		}
		if !generate {
			return badInput("auth is on for %s but there is no cluster token", nodeIP)
		}
		path := ""
		if token, path, err = generateToken(); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "raygo: auth is on; generated the cluster token in %s (`raygo get-auth-token` prints it; other machines need it in %s or that file)\n", path, auth.EnvToken)
	}
	if err := os.Setenv(auth.EnvMode, string(auth.ModeToken)); err != nil {
		return err
	}
	return os.Setenv(auth.EnvToken, token)
}

// nodeToken says whether auth is on for a node on nodeIP (explicit: RAYGO_AUTH_MODE
// chose) and, when on, the token this machine has ("" when it has none).
func nodeToken(nodeIP string) (token string, on, explicit bool, err error) {
	mode, explicit, err := auth.ModeFor(nodeIP)
	if err != nil {
		return "", false, false, badInput("%v", err)
	}
	if mode == auth.ModeDisabled {
		return "", false, explicit, nil
	}
	if token, err = auth.Load(); err != nil {
		return "", true, explicit, badInput("%v", err)
	}
	return token, true, explicit, nil
}

// generateToken makes a cluster token and saves it where this machine looks for one.
func generateToken() (token, path string, err error) {
	if path = auth.TokenPath(); path == "" {
		return "", "", badInput("no home directory to save a cluster token in: set %s or %s", auth.EnvToken, auth.EnvTokenPath)
	}
	if token, err = auth.Generate(); err != nil {
		return "", "", err
	}
	return token, path, auth.Save(path, token)
}

// daemonToken is the token a daemon (gcs-server, raylet) on nodeIP requires and sends:
// "" when auth is off; an error when it is on and no token is found.
func daemonToken(nodeIP string) (string, error) {
	token, on, _, err := nodeToken(nodeIP)
	if err == nil && on && token == "" {
		err = badInput("auth is on for %s but no cluster token is set: %s", nodeIP, auth.Hint)
	}
	return token, err
}

const getAuthTokenDescription = `Print the cluster token this machine has: RAYGO_AUTH_TOKEN, else the file at
RAYGO_AUTH_TOKEN_PATH, else ~/.raygo/auth_token (what 'raygo start --head' saves when
auth is on). With --generate, make and save one when there is none. Give it to the
other machines and to drivers as RAYGO_AUTH_TOKEN (or in that file, mode 600).`

func runGetAuthToken(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("get-auth-token", getAuthTokenDescription,
		"  raygo get-auth-token\n  raygo get-auth-token --generate\n  export RAYGO_AUTH_TOKEN=$(raygo get-auth-token)\n", stdout)
	generate := fs.Bool("generate", false, "generate and save a token when there is none")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return badInput("get-auth-token: unexpected argument %q (see --help)", fs.Arg(0))
	}
	token, err := auth.Load()
	if err != nil {
		return badInput("%v", err)
	}
	if token == "" && *generate {
		path := ""
		if token, path, err = generateToken(); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "raygo: generated a cluster token in %s\n", path)
	}
	if token == "" {
		return badInput("no cluster token on this machine (%s, %s, ~/.raygo/auth_token); --generate makes one", auth.EnvToken, auth.EnvTokenPath)
	}
	fmt.Fprintln(stdout, token)
	return nil
}

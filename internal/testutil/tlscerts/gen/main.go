// Command gen writes a throwaway CA and loopback certificate (package tlscerts) into the
// directory it is given and prints the environment that turns raygo's TLS on with them,
// one VAR=value per line: `go run ./internal/testutil/tlscerts/gen DIR`.
package main

import (
	"fmt"
	"os"

	"github.com/raygo-dev/raygo/internal/testutil/tlscerts"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gen DIR")
		os.Exit(2)
	}
	files, err := tlscerts.Write(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	for _, kv := range files.Env() {
		fmt.Println(kv)
	}
}

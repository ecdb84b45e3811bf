// Package logging sets up zerolog for raygo processes: JSON lines into a log file,
// readable console output when writing to a terminal.
package logging

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// Levels accepted by --log-level.
const Levels = "debug, info, warn, error"

// ParseLevel turns a --log-level value into a zerolog level.
func ParseLevel(level string) (zerolog.Level, error) {
	switch strings.ToLower(level) {
	case "debug":
		return zerolog.DebugLevel, nil
	case "info", "":
		return zerolog.InfoLevel, nil
	case "warn", "warning":
		return zerolog.WarnLevel, nil
	case "error":
		return zerolog.ErrorLevel, nil
	}
	return zerolog.NoLevel, fmt.Errorf("--log-level %q: must be one of %s", level, Levels)
}

// New returns a logger writing to w: console format when w is a terminal, JSON lines
// otherwise. component becomes the "component" field of every line.
func New(w io.Writer, level zerolog.Level, component string) zerolog.Logger {
	if isTerminal(w) {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	}
	return zerolog.New(w).Level(level).With().Timestamp().Str("component", component).Logger()
}

// OpenFile opens (appending) a JSON-lines log file.
func OpenFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log file %s: %w", path, err)
	}
	return f, nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

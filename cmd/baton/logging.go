package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"
)

// logFlags select the log format and level of long-running commands.
type logFlags struct {
	format string
	level  string
}

func (l *logFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&l.format, "log-format", "auto", "log format: auto (console on a terminal, else json), json, console")
	fs.StringVar(&l.level, "log-level", "info", "log level: debug, info, warn, error")
}

func (l *logFlags) logger(w io.Writer) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(l.level)
	if err != nil {
		return zerolog.Logger{}, fmt.Errorf("--log-level %q: %w", l.level, err)
	}
	switch l.format {
	case "json":
	case "console":
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	case "auto":
		if isTerminal(w) {
			w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
		}
	default:
		return zerolog.Logger{}, fmt.Errorf("--log-format %q: want auto, json or console", l.format)
	}
	// Milliseconds: hand-offs and recoveries are read from logs, and
	// take milliseconds.
	zerolog.TimeFieldFormat = "2006-01-02T15:04:05.000Z07:00"
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

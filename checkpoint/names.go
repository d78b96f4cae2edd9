package checkpoint

import (
	"strings"

	"github.com/batonhq/baton/internal/runid"
)

// setupSuffix marks the checkpoint a session's setup made, before its
// first run's agent.
const setupSuffix = ".setup"

// Name is the data object of the checkpoint run made at its end:
// "<session>/<run>". Its manifest is ManifestName of it.
func Name(session, run string) string { return session + "/" + run }

// SetupName is the data object of the checkpoint made after the
// session's setup, in its first run: "<session>/<run>.setup".
func SetupName(session, run string) string { return Name(session, run) + setupSuffix }

// ManifestName is the manifest object of the data object name.
func ManifestName(object string) string { return object + ".manifest" }

// ValidObject reports whether o is a checkpoint's data object name.
func ValidObject(o string) bool {
	session, run, ok := strings.Cut(o, "/")
	run = strings.TrimSuffix(run, setupSuffix)
	return ok && runid.Valid(session) && runid.Valid(run)
}

// SessionOf is the session whose run made the data object o (a fork's
// chain names objects of the session it was forked from).
func SessionOf(o string) string {
	s, _, _ := strings.Cut(o, "/")
	return s
}

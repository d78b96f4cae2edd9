package chain

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/batonhq/baton/journal"
	"github.com/batonhq/baton/sandbox/runspec"
)

// maxSpecBytes bounds the spec file a stage reads.
const maxSpecBytes = 16 << 20

// ReadSpec reads and validates a spec file, never through a link; the run
// directory is the spec's own.
func ReadSpec(path string) (runspec.Spec, error) {
	f, err := journal.OpenNoLinks(path, os.O_RDONLY, 0)
	if err != nil {
		return runspec.Spec{}, fmt.Errorf("read spec: %w", err)
	}
	b, err := ReadFile(f, path)
	if err != nil {
		return runspec.Spec{}, err
	}
	s, err := runspec.Decode(b)
	if err != nil {
		return runspec.Spec{}, err
	}
	if filepath.Clean(s.RunDir) != filepath.Dir(filepath.Clean(path)) {
		return runspec.Spec{}, fmt.Errorf("%w: spec %s names run directory %s, not its own", runspec.ErrInvalidSpec, path, s.RunDir)
	}
	return s, nil
}

// ReadFile reads a spec from f (named path) and closes it, refusing one
// larger than a spec may be.
func ReadFile(f *os.File, path string) ([]byte, error) {
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSpecBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	if len(b) > maxSpecBytes {
		return nil, fmt.Errorf("read spec: %s is larger than %d bytes", path, maxSpecBytes)
	}
	return b, nil
}

// MustJSON encodes values made of strings, ints and slices of them,
// which always encode.
func MustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

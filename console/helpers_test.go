package console_test

import (
	"os"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func msgpackEncode(v any) ([]byte, error) { return msgpack.Marshal(v) }

func mustEncode(t *testing.T, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(name, s string) error { return os.WriteFile(name, []byte(s), 0o600) }

// tempDir is a store directory for the example's server.
func tempDir() string {
	d, err := os.MkdirTemp("", "console-example-")
	if err != nil {
		panic(err)
	}
	return d
}

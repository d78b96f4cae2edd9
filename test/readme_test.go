package test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/batonhq/baton/internal/testenv"
)

// TestReadmeGoBuilds builds the README's "From Go" snippet as the body of
// a main function with the imports its comments name, so that the snippet
// a new user copies compiles against the client as it is. The package is
// given to go build as an overlay: nothing is written to the tree.
func TestReadmeGoBuilds(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)## From Go\n\n```go\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no go block under ## From Go")
	}
	src := `package main

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/client"
	"github.com/batonhq/baton/protocol"
)

func main() {
` + string(m[1]) + "}\n"
	dir := t.TempDir()
	file := filepath.Join(dir, "main.go")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	overlay, _ := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(root, "test", "readmego", "main.go"): file}})
	if err := os.WriteFile(filepath.Join(dir, "overlay.json"), overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-overlay", filepath.Join(dir, "overlay.json"), "-o", os.DevNull, "./test/readmego")
	build.Dir = root
	if out, err := testenv.Build(build); err != nil {
		t.Fatalf("the README's Go snippet, as the body of main with the imports its comments name, does not build: %v\n%s\n%s", err, out, src)
	}
}

// Package e2e holds the helpers the end-to-end suites under test/ share:
// worker processes, a run's chain, docs pages' blocks, a headless browser.
package e2e

import (
	"os"
	"regexp"
	"testing"
)

// DocBlock is a fenced block (sh, yaml) of a docs page that a test runs.
type DocBlock struct {
	Script string
	// KeepsRunning marks a block (one command) that serves until stopped,
	// pasted into a terminal of its own: `<!-- test: NAME, keeps running -->`.
	KeepsRunning bool
}

// DocBlocks returns, in order, the fenced blocks of the markdown file
// that follow a line `<!-- test: name -->` (or `<!-- test: name, keeps
// running -->`): the commands a test runs as the page gives them, so the
// page and the test cannot drift. It fails the test when the page marks
// none.
func DocBlocks(t *testing.T, file, name string) []DocBlock {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)<!-- test: " + regexp.QuoteMeta(name) + "(, keeps running)? -->\n```(?:sh|yaml)\n(.*?)```")
	var blocks []DocBlock
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		blocks = append(blocks, DocBlock{Script: m[2], KeepsRunning: m[1] != ""})
	}
	if len(blocks) == 0 {
		t.Fatalf("%s marks no sh or yaml block with <!-- test: %s -->", file, name)
	}
	return blocks
}

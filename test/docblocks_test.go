package test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// docBlocks returns, in order, the fenced sh blocks of the markdown file
// that follow a line `<!-- test: name -->`: the commands a test runs as
// the page gives them, so the page and the test cannot drift. It fails
// the test when the page marks none.
func docBlocks(t *testing.T, file, name string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)<!-- test: " + regexp.QuoteMeta(name) + " -->\n```sh\n(.*?)```")
	var blocks []string
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		blocks = append(blocks, m[1])
	}
	if len(blocks) == 0 {
		t.Fatalf("%s marks no sh block with <!-- test: %s -->", file, name)
	}
	return blocks
}

// inOrder reports whether s holds each of subs, one after another.
func inOrder(s string, subs ...string) bool {
	for _, sub := range subs {
		i := strings.Index(s, sub)
		if i < 0 {
			return false
		}
		s = s[i+len(sub):]
	}
	return true
}

package journal_test

import (
	"fmt"

	"github.com/batonhq/baton/journal"
)

func ExampleParseSentinel() {
	nonce := "85be979a9cde500b9aa7e513cd00a79f"
	for _, line := range []string{
		`{"__exit":2,"__nonce":"85be979a9cde500b9aa7e513cd00a79f","reason":"exit"}`,
		`{"__exit":0,"__nonce":"0000000000000000000000000000000"}`,    // another nonce
		`{"__exit":1.5,"__nonce":"85be979a9cde500b9aa7e513cd00a79f"}`, // not an integer
	} {
		s, ok := journal.ParseSentinel([]byte(line), nonce)
		fmt.Println(ok, s.Exit)
	}
	// Output:
	// true 2
	// false 0
	// false 0
}

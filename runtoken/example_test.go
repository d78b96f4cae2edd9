package runtoken_test

import (
	"fmt"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/batonhq/baton/protocol"
	"github.com/batonhq/baton/runtoken"
)

func ExampleIssuer_Issue() {
	seed, _, _ := runtoken.NewKey()
	iss, _ := runtoken.NewIssuer(seed, protocol.MustNames(""))
	tok, _ := iss.Issue("run-42", 15*time.Minute, false)

	uc, _ := jwt.DecodeUserClaims(tok)
	fmt.Println("connection types:", uc.AllowedConnectionTypes)
	fmt.Println("publish:", uc.Pub.Allow)
	fmt.Println("subscribe:", uc.Sub.Allow)
	fmt.Println("inbox prefix:", runtoken.InboxPrefix("run-42"))
	// Output:
	// connection types: [WEBSOCKET]
	// publish: [baton.read.events.run-42]
	// subscribe: [baton.runs.run-42.> _INBOX_run.run-42.>]
	// inbox prefix: _INBOX_run.run-42
}

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
	// publish: [$JS.API.STREAM.INFO.BATON_EVENTS $JS.API.CONSUMER.CREATE.BATON_EVENTS.*.baton.runs.run-42.> $JS.API.CONSUMER.MSG.NEXT.BATON_EVENTS.*]
	// subscribe: [baton.runs.run-42.> _INBOX_run.run-42.>]
	// inbox prefix: _INBOX_run.run-42
}

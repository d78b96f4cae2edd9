package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/console"
	"github.com/batonhq/baton/protocol"
)

// Mount the console in an application's own mux, under /baton/.
func Example() {
	dir := tempDir()
	defer os.RemoveAll(dir)
	s, _ := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	go s.Start()
	defer s.Shutdown()
	s.ReadyForConnections(10 * time.Second)
	nc, _ := nats.Connect(s.ClientURL())
	defer nc.Close()
	js, _ := jetstream.New(nc)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := console.New(ctx, js, protocol.MustNames("baton"),
		console.WithToken("s3cret"), console.WithBasePath("/baton/"), console.WithReadOnly())
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	mux.Handle("/baton/", http.StripPrefix("/baton", c))

	for _, auth := range []string{"", "Bearer s3cret"} {
		req := httptest.NewRequest("GET", "/baton/api/config", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		fmt.Println(rec.Code, rec.Body.String())
	}
	// Output:
	// 401 unauthorized: give the console's token (Authorization: Bearer, or log in)
	//
	// 200 {"auth":true,"prefix":"baton","readOnly":true,"tokens":false}
}

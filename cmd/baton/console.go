package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/batonhq/baton/console"
	"github.com/batonhq/baton/runtoken"
)

func newConsoleCmd(g *globals) *cobra.Command {
	var (
		listen, tokenFile, tlsCert, tlsKey string
		signingKey                         string
		readOnly, insecure                 bool
		sessionTTL                         time.Duration
	)
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Serve the web console: runs, live transcripts, workers, dead letters",
		Long: `console serves a web UI for the deployment: the runs (filtered, searched,
updated live), each run's transcript replayed from its start and followed
live, its status timeline, cancel and input, the workers and the dead
letters. Its assets are built in.

Every request needs the console's token: $BATON_CONSOLE_TOKEN, the content
of --token-file, or else a token generated now and printed in the URL to
open. Opened once with ?token=, the browser keeps an HttpOnly cookie;
scripts send Authorization: Bearer. It listens beyond loopback only with
TLS (--tls-cert, --tls-key) or --insecure.

It fails at start if NATS cannot be reached; later it reconnects for as
long as it runs, and its pages say when NATS cannot be reached.

With --signing-key it also hands out run tokens (see 'baton token') on
each run's page, and answers the NATS server's auth callout for them.`,
		Example: `  baton console
  BATON_CONSOLE_TOKEN=s3cret baton console --listen 127.0.0.1:8233 --read-only
  baton console --listen :8443 --tls-cert cert.pem --tls-key key.pem --token-file /etc/baton/console-token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			useTLS := tlsCert != "" || tlsKey != ""
			if useTLS && (tlsCert == "" || tlsKey == "") {
				return errors.New("--tls-cert and --tls-key go together")
			}
			if err := console.CheckListen(listen, useTLS, insecure); err != nil {
				return err
			}
			token, generated, err := console.ResolveToken(os.Getenv("BATON_CONSOLE_TOKEN"), tokenFile)
			if err != nil {
				return err
			}
			names, err := g.names()
			if err != nil {
				return err
			}
			// The first connect must succeed: a console that starts without
			// NATS would print its URL as if healthy. Later it reconnects
			// for as long as it runs, and its pages say NATS cannot be
			// reached meanwhile.
			nc, err := nats.Connect(g.natsURL, nats.Name("baton-console"), nats.MaxReconnects(-1),
				nats.ReconnectWait(250*time.Millisecond),
				nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
					fmt.Fprintf(cmd.ErrOrStderr(), "baton console: NATS: %v\n", err)
				}),
				nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
					if !nc.IsClosed() { // not the console's own close at its end
						fmt.Fprintf(cmd.ErrOrStderr(), "baton console: NATS cannot be reached: %v (reconnecting)\n", err)
					}
				}),
				nats.ReconnectHandler(func(nc *nats.Conn) {
					fmt.Fprintf(cmd.ErrOrStderr(), "baton console: NATS reconnected at %s\n", nc.ConnectedUrlRedacted())
				}))
			if err != nil {
				return g.connectError(err)
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				return err
			}
			opts := []console.Option{console.WithToken(token), console.WithSessionTTL(sessionTTL)}
			if readOnly {
				opts = append(opts, console.WithReadOnly())
			}
			if useTLS {
				opts = append(opts, console.WithSecureCookie())
			}
			if signingKey != "" {
				iss, err := runtoken.LoadIssuer(signingKey, names)
				if err != nil {
					return err
				}
				// The console answers the server's auth callout for the
				// tokens it and 'baton token' hand out.
				if err := iss.Serve(ctx, nc); err != nil {
					return fmt.Errorf("auth callout on %s: %w", runtoken.AuthSubject, err)
				}
				opts = append(opts, console.WithTokenIssuer(iss.Issue))
			}
			c, err := console.New(ctx, js, names, opts...)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("--listen: %w", err)
			}
			scheme := "http"
			if useTLS {
				scheme = "https"
			}
			u := url.URL{Scheme: scheme, Host: ln.Addr().String(), Path: "/"}
			if generated {
				u.RawQuery = url.Values{"token": {token}}.Encode()
			}
			fmt.Fprintf(cmd.OutOrStdout(), "baton console: %s\n", u.String())
			srv := &http.Server{Handler: c, ReadHeaderTimeout: 10 * time.Second}
			errc := make(chan error, 1)
			go func() {
				if useTLS {
					errc <- srv.ServeTLS(ln, tlsCert, tlsKey)
				} else {
					errc <- srv.Serve(ln)
				}
			}()
			select {
			case err := <-errc:
				return err
			case <-ctx.Done():
			}
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			// Live streams never end by themselves: close what is left.
			if err := srv.Shutdown(sctx); err != nil {
				_ = srv.Close()
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8233", "address to serve on")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "file holding the console's token (default: $BATON_CONSOLE_TOKEN, else a generated one)")
	cmd.Flags().StringVar(&tlsCert, "tls-cert", "", "TLS certificate (PEM) to serve HTTPS")
	cmd.Flags().StringVar(&tlsKey, "tls-key", "", "TLS private key (PEM)")
	cmd.Flags().BoolVar(&readOnly, "read-only", false, "hide cancel, input, re-run and dead-letter retry and delete, and refuse them")
	cmd.Flags().DurationVar(&sessionTTL, "session-ttl", console.DefaultSessionTTL, "how long a browser stays logged in (Log out ends it sooner)")
	cmd.Flags().StringVar(&signingKey, "signing-key", os.Getenv("BATON_SIGNING_KEY_FILE"), "account signing key (seed file): hand out run tokens and answer the server's auth callout for them (deploy/nats-browser.conf)")
	cmd.Flags().BoolVar(&insecure, "insecure", false, "allow a non-loopback listen address without TLS (the token crosses the network in clear)")
	return cmd
}

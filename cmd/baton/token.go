package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton/runtoken"
)

func newTokenCmd(g *globals) *cobra.Command {
	var (
		keyFile, newKey string
		ttl             time.Duration
		input           bool
	)
	cmd := &cobra.Command{
		Use:   "token RUNID",
		Short: "Print a NATS credential that lets a browser watch one run",
		Long: `token prints a NATS user JWT, signed with the account signing key of
--signing-key, that allows exactly: subscribing to <prefix>.runs.<runId>.>,
asking the workers' read relay for that run's chain
(<prefix>.read.events.<runId>), the inbox prefix _INBOX_run.<runId>, and with --input publishing on <prefix>.input.<runId>;
over WebSocket only, until it expires (--ttl).

Give it to nats-server as the connect token on the websocket listener of
deploy/nats-browser.conf; the auth callout (served by 'baton console
--signing-key') checks it. --new-key FILE writes a new signing key (0600)
and prints its public key, the server's BATON_CALLOUT_ISSUER.`,
		Example: `  baton token --new-key /etc/baton/signing.nk
  baton token run-5kq2m8x3c1v7b0n4d6fa --signing-key /etc/baton/signing.nk --ttl 15m
  baton token run-5kq2m8x3c1v7b0n4d6fa --signing-key /etc/baton/signing.nk --input`,
		Args: func(cmd *cobra.Command, args []string) error {
			if newKey != "" {
				return cobra.NoArgs(cmd, args)
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if newKey != "" {
				seed, pub, err := runtoken.NewKey()
				if err != nil {
					return err
				}
				f, err := os.OpenFile(newKey, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
				if err != nil {
					return fmt.Errorf("--new-key: %w", err)
				}
				if _, err := fmt.Fprintf(f, "%s\n", seed); err != nil {
					f.Close()
					return err
				}
				if err := f.Close(); err != nil {
					return err
				}
				_, err = fmt.Fprintln(cmd.OutOrStdout(), pub)
				return err
			}
			if keyFile == "" {
				return errors.New("--signing-key (or $BATON_SIGNING_KEY_FILE) is required")
			}
			names, err := g.names()
			if err != nil {
				return err
			}
			iss, err := runtoken.LoadIssuer(keyFile, names)
			if err != nil {
				return err
			}
			tok, err := iss.Issue(args[0], ttl, input)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), tok)
			return err
		},
	}
	cmd.Flags().StringVar(&keyFile, "signing-key", os.Getenv("BATON_SIGNING_KEY_FILE"), "file holding the account signing key's seed ($BATON_SIGNING_KEY_FILE)")
	cmd.Flags().DurationVar(&ttl, "ttl", 15*time.Minute, "how long the token is valid (at most 24h)")
	cmd.Flags().BoolVar(&input, "input", false, "also allow sending the run's input")
	cmd.Flags().StringVar(&newKey, "new-key", "", "write a new signing key to this file and print its public key")
	return cmd
}

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/natsurl"
	"github.com/batonhq/baton/protocol"
)

// globals are the flags every subcommand shares.
type globals struct {
	natsURL    string
	configFile string
	stateDir   string
	node       string
}

func (g *globals) register(fs *pflag.FlagSet) {
	def := os.Getenv("NATS_URL")
	if def == "" {
		def = "nats://127.0.0.1:4222"
	}
	fs.StringVar(&g.natsURL, "nats", def, "NATS server URL, or several separated by commas ($NATS_URL sets the default)")
	fs.StringVar(&g.configFile, "config", "", "configuration file (YAML or JSON)")
	fs.StringVar(&g.stateDir, "state-dir", defaultStateDir(), "directory holding run journals and embedded NATS data")
	fs.StringVar(&g.node, "node", "", "node id (default: the host name)")
}

func defaultStateDir() string {
	if d := os.Getenv("BATON_STATE_DIR"); d != "" {
		return d
	}
	if os.Geteuid() == 0 {
		return "/var/lib/baton"
	}
	if d, err := os.UserCacheDir(); err == nil {
		return d + "/baton"
	}
	return ".baton"
}

// nodeID is the flag's value, or the host name made into a subject token.
func (g *globals) nodeID() (string, error) {
	if g.node != "" {
		if !protocol.ValidNodeID(g.node) {
			return "", fmt.Errorf("--node %q: must match [A-Za-z0-9_-]{1,64}", g.node)
		}
		return g.node, nil
	}
	h, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("node id: %w (set --node)", err)
	}
	return protocol.NodeIDFrom(h), nil
}

// loadConfig reads --config, or returns the defaults with the demo profile.
func (g *globals) loadConfig() (*config.Config, error) {
	if g.configFile == "" {
		return config.Default(), nil
	}
	return config.Load(g.configFile)
}

// names returns the subject names of the configured prefix.
func (g *globals) names() (protocol.Names, error) {
	cfg, err := g.loadConfig()
	if err != nil {
		return protocol.Names{}, err
	}
	return protocol.NewNames(cfg.Prefix)
}

// connect dials NATS for a short-lived client command.
func (g *globals) connect(ctx context.Context) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(g.natsURL, nats.Name("baton-cli"), nats.Timeout(5*time.Second),
		// A refused publish or subscribe is otherwise silent: say so.
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			fmt.Fprintf(os.Stderr, "baton: NATS: %v\n", err)
		}))
	if err != nil {
		return nil, nil, g.connectError(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// connectError says why connecting to --nats failed, naming the servers
// (but no password or token).
func (g *globals) connectError(err error) error {
	if errors.Is(err, nats.ErrNoServers) {
		return fmt.Errorf("cannot reach NATS at %s: %w (is nats-server running there?)", natsurl.Redact(g.natsURL), err)
	}
	return fmt.Errorf("connect to NATS at %s: %w", natsurl.Redact(g.natsURL), err)
}

// exitCodeError makes main exit with a code and no message.
type exitCodeError int

func (e exitCodeError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func asExitCode(err error, target *exitCodeError) bool { return errors.As(err, target) }

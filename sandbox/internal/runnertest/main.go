// Command runnertest is a stand-in for the baton binary in the sandbox
// package's tests: it dispatches the runner chain's subcommands to the
// sandbox package as cmd/baton does, and adds helpers the tests run:
//
//	runnertest runner-outer|runner-inner|runner-inner-child|runner-exec --spec PATH
//	runnertest start SPEC.json INPUT   # sandbox.Start with this binary, print "pid N", then wait to be killed
//	runnertest netprobe                # as an agent: list interfaces, prove loopback carries TCP
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/batonhq/baton/sandbox"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "runnertest:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: runnertest runner-outer|runner-inner|runner-inner-child --spec PATH | start SPEC INPUT | netprobe")
	}
	ctx := context.Background()
	for _, st := range sandbox.Stages {
		if st.Name != args[0] {
			continue
		}
		if len(args) != 3 || args[1] != "--spec" {
			return fmt.Errorf("usage: runnertest %s --spec PATH", args[0])
		}
		return st.Run(ctx, args[2])
	}
	switch args[0] {
	case "start":
		if len(args) != 3 {
			return fmt.Errorf("usage: runnertest start SPEC INPUT")
		}
		return start(ctx, args[1], args[2])
	case "netprobe":
		return netprobe()
	}
	return fmt.Errorf("unknown command %q", args[0])
}

// start is a worker stand-in that tests kill after Start returns.
func start(ctx context.Context, specPath, inputPath string) error {
	b, err := os.ReadFile(specPath)
	if err != nil {
		return err
	}
	var spec sandbox.Spec
	if err := json.Unmarshal(b, &spec); err != nil {
		return err
	}
	input, err := os.ReadFile(inputPath)
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	r, err := sandbox.Start(ctx, spec, input, sandbox.WithBinary(exe))
	if err != nil {
		return err
	}
	fmt.Printf("pid %d\n", r.PID)
	// Until the test kills it. Not select{}: with no goroutine left the
	// runtime takes that for a deadlock and exits 2.
	for {
		time.Sleep(time.Hour)
	}
}

// netprobe prints each interface with its flags, then a TCP round trip
// over 127.0.0.1, which works only if loopback is up.
func netprobe() error {
	ifs, err := net.Interfaces()
	if err != nil {
		return err
	}
	for _, i := range ifs {
		fmt.Printf("iface %s %s\n", i.Name, i.Flags)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Printf("loopback-tcp error %v\n", err)
		return nil
	}
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Write([]byte("pong"))
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		fmt.Printf("loopback-tcp error %v\n", err)
		return nil
	}
	defer c.Close()
	buf := make([]byte, 4)
	n, _ := c.Read(buf)
	fmt.Printf("loopback-tcp %s\n", buf[:n])
	return nil
}

package stage

import (
	"os"
	"strconv"

	"github.com/batonhq/baton/sandbox/internal/chain"
)

// readyPipe is runner-outer's end of the readiness pipe; nil when the
// runner was not started by sandbox.Start.
type readyPipe struct{ f *os.File }

// takeReadyPipe finds the readiness descriptor and removes its variable
// from the environment, so nothing started later sees it.
func takeReadyPipe() *readyPipe {
	f := inheritedFile(chain.ReadyFDEnv, "ready")
	if f == nil {
		return nil
	}
	return &readyPipe{f: f}
}

// inheritedFile is the descriptor the variable env names, nil if none;
// the variable is removed, so nothing started later sees it.
func inheritedFile(env, name string) *os.File {
	v, ok := os.LookupEnv(env)
	if !ok {
		return nil
	}
	os.Unsetenv(env)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil
	}
	return os.NewFile(uintptr(fd), name)
}

func (p *readyPipe) ok() { p.send(chain.ReadyOK) }

func (p *readyPipe) fail(err error) { p.send(err.Error()) }

func (p *readyPipe) send(msg string) {
	if p == nil || p.f == nil {
		return
	}
	_, _ = p.f.WriteString(msg)
	_ = p.f.Close()
	p.f = nil
}

package chain

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/journal"
)

// InputSocketPath names the run directory's input socket through an
// O_PATH descriptor of the directory, returned for the caller to close
// once it has bound or dialled: a run directory's path may be longer than
// a unix socket address (108 bytes).
func InputSocketPath(dir journal.Dir) (*os.File, string, error) {
	d, err := journal.OpenNoLinks(string(dir), unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, "", err
	}
	return d, "/proc/self/fd/" + strconv.Itoa(int(d.Fd())) + "/" + journal.InputSocketName, nil
}

// ToolsSocketPath names the run directory's tools socket, as
// InputSocketPath does the input socket.
func ToolsSocketPath(dir journal.Dir) (*os.File, string, error) {
	d, err := journal.OpenNoLinks(string(dir), unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, "", err
	}
	return d, "/proc/self/fd/" + strconv.Itoa(int(d.Fd())) + "/" + journal.ToolsSocketName, nil
}

#!/usr/bin/env bash
# The project's test command (README): installs what the tests need on a
# fresh Debian machine, then runs every test, fuzz seed corpus included.
# Longer suites run when asked: BATON_SOAK=1 (see docs/development.md).
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the sandbox and its tests use (only the missing ones are
# installed: systemd, present on Debian, is never upgraded under a test).
need=()
command -v pasta >/dev/null || need+=(passt)
command -v nft >/dev/null || need+=(nftables)
command -v ip >/dev/null || need+=(iproute2)
command -v bwrap >/dev/null || need+=(bubblewrap)
[ -x /lib/systemd/systemd ] || need+=(systemd)             # the unit's tests
command -v nsenter >/dev/null || need+=(util-linux)
command -v mkfs.ext4 >/dev/null || [ -x /sbin/mkfs.ext4 ] || need+=(e2fsprogs) # bounded workspaces
command -v chromium >/dev/null || need+=(chromium)         # the console's browser test
command -v npm >/dev/null || need+=(npm)           # the real agent CLIs' test, AG-UI's schemas, the TypeScript client
command -v git >/dev/null || need+=(git) # outputs: the captured patch is checked with git apply
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "test/run.sh: missing Debian packages: ${need[*]} (run: sudo apt-get install ${need[*]})" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

go version
go mod download
go vet ./...
# One build of the baton binary shared by every package's tests.
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
chmod 0755 "$bin"
go build -o "$bin/baton" ./cmd/baton
# Found beside baton by workers; static, as README's install line builds it.
CGO_ENABLED=0 go build -o "$bin/baton-runner" ./cmd/baton-runner
export BATON_BIN="$bin/baton"
# Tests that measure this machine against itself (a latency bound, a lease
# renewal under a 500 MB transfer) run after the others, one package at a
# time: beside the other packages their figures are those packages' load (a
# fresh-clone CI failed TestFirstInputUnderLoad so).
alone='^(TestFirstInputUnderLoad|TestLargeCheckpointKeepsItsLease)$'
# Three packages at a time on 2 cores: their tests mostly wait (on leases,
# servers, sandboxes), and two at a time left half the CPU idle. The longest
# packages are named first, for go test starts packages in the order named
# (./... adds the rest, each once): in ./...'s order worker and the
# end-to-end suites came last, and the run waited on them alone for minutes.
longest=(./worker ./test ./test/browser ./test/escape ./console ./sandbox)
go test -race -count=1 -timeout 14m -p 3 -skip "$alone" "$@" "${longest[@]}" ./...
go test -race -count=1 -timeout 5m -p 1 -run "$alone" "$@" ./worker ./test

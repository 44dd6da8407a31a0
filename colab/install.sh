#!/usr/bin/env bash
# Install what the GoFlash notebooks and commands need on a hosted runtime
# (Colab, Kaggle) or any Debian/Ubuntu machine where we may write /usr/local:
# Go, GoNB and goimports at pinned versions, and GoNB's Jupyter kernelspec.
# Safe to run again: what is already there at the right version is kept.
set -euo pipefail

GO_VERSION=${GO_VERSION:-1.26.8}
GONB_VERSION_PIN=v0.11.5
GOIMPORTS_VERSION=v0.52.0

export PATH=/usr/local/go/bin:/root/go/bin:$HOME/go/bin:$PATH

fail() { # fail WHAT: say what could not be installed and how to get further, then stop
	echo "install: $1: no Internet access?" >&2
	if [ -d /kaggle ]; then
		echo "install: on Kaggle, turn on Settings → Internet (it needs a phone-verified account), then run again" >&2
	fi
	exit 1
}

if [ "$(go version 2>/dev/null | cut -d' ' -f3)" != "go$GO_VERSION" ]; then
	echo "installing Go $GO_VERSION"
	arch=$(uname -m)
	case "$arch" in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; esac
	if ! curl -fsSL "https://go.dev/dl/go$GO_VERSION.linux-$arch.tar.gz" -o /tmp/go.tar.gz; then
		fail "cannot download Go from go.dev"
	fi
	rm -rf /usr/local/go
	tar -C /usr/local -xzf /tmp/go.tar.gz
	rm /tmp/go.tar.gz
fi
gobin=$(go env GOPATH)/bin

if ! go version -m "$gobin/gonb" 2>/dev/null | grep -q "mod.*github.com/janpfeifer/gonb.*$GONB_VERSION_PIN"; then
	echo "installing GoNB $GONB_VERSION_PIN"
	# From a throwaway module: `go install ...@version` reads the module's
	# version list, which some proxies refuse.
	tmp=$(mktemp -d)
	if ! (cd "$tmp" && go mod init tools >"$tmp/log" 2>&1 &&
		go get "github.com/janpfeifer/gonb@$GONB_VERSION_PIN" >>"$tmp/log" 2>&1 &&
		go install github.com/janpfeifer/gonb >>"$tmp/log" 2>&1); then
		tail -n 20 "$tmp/log" >&2
		fail "cannot install GoNB $GONB_VERSION_PIN from the Go module proxy"
	fi
	rm -rf "$tmp"
fi
if ! go version -m "$gobin/goimports" 2>/dev/null | grep -q "mod.*golang.org/x/tools.*$GOIMPORTS_VERSION"; then
	echo "installing goimports $GOIMPORTS_VERSION"
	go install "golang.org/x/tools/cmd/goimports@$GOIMPORTS_VERSION" || fail "cannot install goimports $GOIMPORTS_VERSION from the Go module proxy"
fi
# The kernel is started by Jupyter with its own PATH: make the tools findable.
for t in go gofmt; do ln -sf "/usr/local/go/bin/$t" "/usr/local/bin/$t" 2>/dev/null || true; done
for t in gonb goimports; do ln -sf "$gobin/$t" "/usr/local/bin/$t" 2>/dev/null || true; done

if ! out=$(gonb --install --raw_error --force_deps 2>&1); then
	echo "$out" | tail -n 20 >&2
	echo "install: gonb --install could not register the Go kernel with Jupyter" >&2
	exit 1
fi
echo "$(go version | cut -d' ' -f3), GoNB $GONB_VERSION_PIN, goimports $GOIMPORTS_VERSION: ready"

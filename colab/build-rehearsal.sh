#!/usr/bin/env bash
# Build, on a machine with Go, what colab/rehearse.sh runs on a GPU machine
# that has no Go: the goflash command, the GPU tests of flashattn, and
# notebooks 06 and 07 as programs (notebooks/internal/nbprog), into
# .build/rehearsal/, packed as .build/rehearsal.tar.xz (git-ignored; rehearse.sh
# unpacks it on the GPU machine). Each binary embeds the kernel images: the four
# are about 140 MiB, packed (xz) about 46 MiB.
#
#   colab/build-rehearsal.sh && ls .build/rehearsal
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=.build/rehearsal
rm -rf "$out"
mkdir -p "$out/src"
export CGO_ENABLED=0
rev=$(git rev-parse HEAD)
if [ -n "$(git status --porcelain)" ]; then rev=$rev+dirty; fi
# -s -w: no symbol tables (smaller binaries, a smaller packed file to carry).
go build -o "$out/goflash" -ldflags "-s -w -X main.commit=$rev" ./cmd/goflash
go test -c -o "$out/flashattn.test" -ldflags "-s -w" ./flashattn
for nb in 06_cuda_from_go 07_benchmarks; do
	go run ./notebooks/internal/nbprog -o "$out/src/$nb/main.go" "notebooks/$nb.ipynb"
	go build -o "$out/nb$nb" -ldflags "-s -w" "$out/src/$nb/main.go"
done
echo "$rev" >"$out/commit"
tar -C .build -cJf .build/rehearsal.tar.xz rehearsal
du -sh "$out" .build/rehearsal.tar.xz
ls -l "$out"

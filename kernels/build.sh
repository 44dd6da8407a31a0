#!/usr/bin/env bash
# build.sh: regenerate the committed kernel artifacts from kernels/*.cu[h]. One
# image per kernel family, each from its own translation unit, so that a change
# to one family's source leaves the other families' images byte-identical:
#   fa2_<family>.fatbin        family fwd (fwd.cu), bwd (bwd.cu), decode (decode.cu)
#                              or ladder (ladder.cu): SASS sm_75/80/86/89/90 + PTX
#                              compute_75/compute_80, compressed (what Go embeds)
#   fa2_<family>_ptx75.fatbin  the family's Turing kernels alone as compressed
#                              compute_75 PTX (Go loads it to force the sm_75 path
#                              through the driver's JIT on newer GPUs)
#   fa2_sm90a.cubin            the Hopper forward (fa2_sm90a.cu), SASS for sm_90a only,
#                              built by the private nvcc 12.4 of cuda12.sh (wgmma and
#                              TMA need CUDA 12)
#   resources.md               registers / stack / spills per kernel per arch and the
#                              image holding it, the tile table, and the resident CTAs
#                              and warps per SM that follow from them
#   table_gen.go               the Go Variant table, from the same traits.cuh (and ladder/ladder.cuh)
# Every (family, arch) pair is its own job (cicc, then ptxas, as nvcc -fatbin runs
# them; fatbinary then packs each family exactly as nvcc -fatbin would), and the
# jobs run in parallel, nproc at a time.
# Usage: kernels/build.sh [OUTDIR]   (default internal/kernels; `go generate ./internal/kernels`)
# Deterministic: nvcc 11.8 gives byte-identical output across runs and paths, so
# kernels/check.sh can rebuild and compare with the committed files.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../internal/kernels}
mkdir -p "$out"
out=$(cd "$out" && pwd)

want=11.8
if ! command -v nvcc >/dev/null || ! nvcc --version | grep -q "release $want"; then
  # Debian 12 ships CUDA 11.8 in non-free, a component not enabled by default.
  echo "build.sh: installing nvcc $want from Debian non-free" >&2
  sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo tee /etc/apt/sources.list.d/goflash-nonfree.sources >/dev/null <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: contrib non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nvidia-cuda-toolkit >/dev/null
fi
nvcc --version | grep -q "release $want" || { echo "build.sh: need nvcc $want, got: $(nvcc --version | tail -1)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$here"
families="bwd fwd decode ladder" # the longest first, so that the parallel jobs end together
archs="75 80 86 89 90"            # SASS per arch; the compute_75 and compute_80 PTX go in as well
nvcc12=$("$here/cuda12.sh")
export tmp nvcc12 archs
# job KIND ARG...: one unit of the build, its output and its log in $tmp.
#   sass F A: family F's compute_A PTX (cicc) and its sm_A SASS (ptxas -v: the resources log).
#     -O3, no -lineinfo (keeps the artifact free of paths), no --use_fast_math: the
#     only approximate op the kernels need is ex2.approx, written out in mma.cuh.
#   ptx75 F: family F's Turing kernels alone (FA2_SM75_ONLY) as compute_75 PTX, in
#     a compressed PTX-only fatbin (about a fifth of the text, and every loader,
#     cuModuleLoadData, takes it as it takes the PTX text).
#   sm90a: the Hopper forward, its own module (a fatbin image holds one arch's
#     kernels and nvcc 11.8's fatbinary refuses sm_90a; docs/kernels.md), so the
#     fatbins stay nvcc 11.8's alone and their sm_90 images are what ForcePath(80)
#     runs. nvcc 12.4's cubin is byte-identical across runs and directories too.
#   tiles: the host program that prints the tile tables and the Go table.
job() {
  case $1 in
    sass) nvcc -O3 -std=c++17 -ptx -arch="compute_$3" "$2.cu" -o "$tmp/$2.$3.ptx" &&
          ptxas -arch="sm_$3" -m64 -v "$tmp/$2.$3.ptx" -o "$tmp/$2.$3.cubin" 2>"$tmp/$2.$3.ptxas.log" ;;
    ptx75) nvcc -O3 -std=c++17 -ptx -arch=compute_75 -DFA2_SM75_ONLY "$2.cu" -o "$tmp/$2.ptx75.ptx" &&
           nvcc -Xfatbin=-compress-all -fatbin -gencode arch=compute_75,code=compute_75 "$tmp/$2.ptx75.ptx" \
             -o "$tmp/fa2_$2_ptx75.fatbin" ;;
    sm90a) "$nvcc12" -O3 -std=c++17 -Xptxas -v -cubin -gencode arch=compute_90a,code=sm_90a fa2_sm90a.cu \
             -o "$tmp/fa2_sm90a.cubin" 2>"$tmp/sm90a.ptxas.log" ;;
    tiles) nvcc -std=c++17 -x cu tiles.cu -o "$tmp/tiles" ;;
    # fatbinary with nvcc -fatbin's own arguments, images in its order, so each
    # fa2_<family>.fatbin is byte for byte what nvcc -fatbin <family>.cu gives.
    # -compress-all: the SASS images are compressed too (by default only the PTX),
    # to about a quarter; the driver inflates them at cuModuleLoadData (what
    # PyTorch's wheels do).
    pack) local ims=() a
          for a in $archs; do
            case $a in 75 | 80) ims+=("--image3=kind=ptx,sm=$a,file=$tmp/$2.$a.ptx") ;; esac
            ims+=("--image3=kind=elf,sm=$a,file=$tmp/$2.$a.cubin")
          done
          fatbinary --create="$tmp/fa2_$2.fatbin" -64 -compress-all --cmdline="-v " \
            --cicc-cmdline="-ftz=0 -prec_div=1 -prec_sqrt=1 -fmad=1 " "${ims[@]}" ;;
    *) echo "build.sh: unknown job $*" >&2; return 1 ;;
  esac >"$tmp/job.${*// /.}.out" 2>&1 || { echo "build.sh: job '$*' failed:" >&2; cat "$tmp/job.${*// /.}.out" >&2; return 1; }
}
export -f job
# run_jobs: the jobs of stdin, one a line, nproc at a time; fails if any fails.
run_jobs() { xargs -P "$(nproc)" -L 1 bash -c 'job "$@"' job; }
{
  for f in $families; do for a in $archs; do echo "sass $f $a"; done; done
  echo sm90a
  for f in $families; do echo "ptx75 $f"; done
  echo tiles
} | run_jobs
for f in $families; do echo "pack $f"; done | run_jobs
"$tmp/tiles" under8 >"$tmp/under8.rows"

{
  echo "<!-- generated by kernels/build.sh from kernels/*.cu[h]; do not edit -->"
  echo "# FA2 kernels: tiles and resources"
  echo
  echo "nvcc: $(nvcc --version | grep -o 'release [0-9.]*, V[0-9.]*')"
  echo
  echo "## Tiles (kernels/traits.cuh)"
  echo
  echo "| symbol | arch | D | causal | Br | Bc | warps | stages | splits | Q in regs | dynamic smem bytes |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  "$tmp/tiles" fwd | tee "$tmp/fwd.rows"
  echo
  echo "## Backward tiles (kernels/traits.cuh)"
  echo
  echo "Br: query rows per CTA (pre, dq, dqconv) or per step (dkdv, dkdvq); Bc: key rows per step (dq) or per CTA (dkdv, dkdvq);"
  echo "chunk: streamed rows per sub-step; regs: the owned operands (K, V or Q, dO) kept in registers"
  echo "(dkdvq, the single pass: K and V fragments of its S^T warp tile; dqconv: its dQ convert kernel)."
  echo
  echo "| symbol | arch | D | causal | Br | Bc | warps | stages | chunk | regs | dynamic smem bytes |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  "$tmp/tiles" bwd | tee "$tmp/bwd.rows"
  echo
  echo "## Decode tiles (kernels/traits.cuh)"
  echo
  echo "Br: packed query rows per CTA (Nq x Hq/Hkv: one m16 tile, or 8 rows as the n8 of n8.cuh); Bc: keys per block; Bw: keys per warp per"
  echo "block; the last CTA of each split group merges the splits (decode.cuh)."
  echo
  echo "| symbol | arch | D | causal | Br | Bc | warps | stages | Bw | bf16 | dynamic smem bytes |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  "$tmp/tiles" decode | tee "$tmp/decode.rows"
  echo
  echo "## Hopper tiles (kernels/traits.cuh, fa2_sm90a.cubin)"
  echo
  echo "warps: one producer warpgroup and Br/64 (backward: Bc/64) consumer warpgroups; stages: K/V (backward: Q/dO) stages of the TMA pipeline; the backward's pre and dqconv: 8 warps, Br rows per CTA."
  echo
  echo "| symbol | arch | D | causal | Br | Bc | warps | stages | splits | Q in regs | dynamic smem bytes |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  "$tmp/tiles" sm90a | tee "$tmp/sm90a.rows"
  echo
  echo "## Kernel ladder (kernels/ladder/, tutorial chapter 6)"
  echo
  echo "Rungs 1-4: the same code on both paths, static shared memory only; rung 5 is the shipped forward kernel."
  echo
  echo "| symbol | rung | D | causal | Br | Bc | warps |"
  echo "|---|---|---|---|---|---|---|"
  "$tmp/tiles" ladder | tee "$tmp/ladder.rows"
  echo
  echo "## Resources per SASS arch (ptxas -v)"
  echo
  echo "| symbol | sm | registers | stack bytes | spill stores | spill loads | static smem bytes | image |"
  echo "|---|---|---|---|---|---|---|---|"
  # ptxas -v prints, per kernel and arch: "Compiling entry function 'X' for 'sm_NN'",
  # "N bytes stack frame, N bytes spill stores, N bytes spill loads",
  # "Used N registers[, N bytes smem], ...".
  # The image is the log's: $tmp/<family>.<arch>.ptxas.log (sm90a: the cubin).
  awk '
    FNR == 1 { n = split(FILENAME, part, "/"); fam = substr(part[n], 1, index(part[n], ".") - 1)
               im = fam == "sm90a" ? "fa2_sm90a.cubin" : "fa2_" fam ".fatbin" }
    /Compiling entry function/ { match($0, /function .[a-z0-9_]+/); fn = substr($0, RSTART + 10, RLENGTH - 10);
                                 match($0, /sm_[0-9]+/); sm = substr($0, RSTART + 3, RLENGTH - 3) }
    /bytes stack frame/ { st = $1; ss = $5; sl = $9 }
    /Used [0-9]+ registers/ { match($0, /Used [0-9]+/); reg = substr($0, RSTART + 5, RLENGTH - 5);
                              sm_b = 0; if (match($0, /[0-9]+ bytes smem/)) sm_b = substr($0, RSTART, RLENGTH - 11) + 0;
                              printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", fn, sm, reg, st, ss, sl, sm_b, im }
  ' "$tmp"/*.ptxas.log | sort -t'|' -k2,2 -k3,3n | tee "$tmp/res.rows"
  echo
  echo "## Resident warps per SM (from the tables above)"
  echo
  echo "Each kernel on the archs it runs on (sm75 symbols: sm_75; sm80: sm_80/86/89/90; ladder: all), as"
  echo "CUDA 11.8's cuda_occupancy.h computes it: registers per warp rounded up to 256, split over 4"
  echo "sub-partitions; shared memory per CTA = static + dynamic (+ 1 KiB reserved on sm_80+), rounded up"
  echo "to 256 B (sm_75) or 128 B (sm_80+), against the SM's largest carveout. limit: the resources that"
  echo "bind (regs / smem / warps / CTAs). why under 8: an sm_75 kernel below 8 resident warps per SM"
  echo "(two per scheduler), from traits.cuh's FA2_SM75_UNDER8 (the build fails on one without a reason)."
  echo
  echo "| symbol | sm | warps per CTA | registers | smem bytes per CTA | CTAs per SM | warps per SM | limit | why under 8 |"
  echo "|---|---|---|---|---|---|---|---|---|"
  awk -F' *\\| *' '
    # Per SM: registers, max warps, max CTAs, shared memory bytes (largest carveout),
    # smem allocation unit, smem reserved per CTA (CUDA C++ Programming Guide,
    # "Technical Specifications per Compute Capability"; cuda_occupancy.h).
    BEGIN { lim[75] = "65536 32 16 65536 256 0";   lim[80] = "65536 64 32 167936 128 1024"
            lim[86] = "65536 48 16 102400 128 1024"; lim[89] = "65536 48 24 102400 128 1024"
            lim[90] = "65536 64 32 233472 128 1024" }
    function up(x, u) { return int((x + u - 1) / u) * u }
    FILENAME ~ /under8.rows$/ { why8[$2] = $3; used8[$2] = 0; next }
    FILENAME ~ /ladder.rows$/ && NF == 9 { warps[$2] = $8; dyn[$2] = 0; next }
    FILENAME ~ /\.rows$/ && NF == 13 && FILENAME !~ /res.rows$/ { warps[$2] = $8; dyn[$2] = $12; next }
    FILENAME ~ /res.rows$/ && NF == 10 {
      own = $2 ~ /_sm75_/ ? ($3 == 75) : $2 ~ /_sm80_/ ? ($3 >= 80) : 1
      if (!own) next
      if (!($3 in lim) || !($2 in warps)) { printf "build.sh: no limits for sm_%s or no tile for %s\n", $3, $2 >"/dev/stderr"; exit 1 }
      split(lim[$3], L, " "); w = warps[$2]
      rw = up($4 * 32, 256); by["regs"] = int(int(L[1] / 4 / rw) * 4 / w)
      sm = up($8 + dyn[$2] + L[6], L[5]); by["smem"] = sm ? int(L[4] / sm) : L[3]
      by["warps"] = int(L[2] / w); by["CTAs"] = L[3]
      n = L[3]; for (r in by) if (by[r] < n) n = by[r]
      why = ""; split("regs smem warps CTAs", order, " ")
      for (i = 1; i <= 4; ++i) if (by[order[i]] == n) why = why (why == "" ? "" : ", ") order[i]
      w8 = ""
      if ($3 == 75 && $2 ~ /_sm75_/) for (pre in why8) if (index($2, pre) == 1) {
        if (n * w >= 8) { printf "build.sh: %s reaches %d warps but FA2_SM75_UNDER8 gives a reason\n", $2, n * w >"/dev/stderr"; bad = 1 }
        w8 = why8[pre]; used8[pre] = 1
      }
      if ($3 == 75 && $2 ~ /_sm75_/ && n * w < 8 && w8 == "") { printf "build.sh: %s runs %d warps per SM on sm_75 and FA2_SM75_UNDER8 has no reason\n", $2, n * w >"/dev/stderr"; bad = 1 }
      printf "| %s | %s | %d | %s | %d | %d | %d | %s | %s |\n", $2, $3, w, $4, sm, n, n * w, why, w8
    }
    END { for (pre in used8) if (!used8[pre]) { printf "build.sh: FA2_SM75_UNDER8 names %s, which matches no sm_75 kernel\n", pre >"/dev/stderr"; bad = 1 }
          if (bad) exit 1 }
  ' "$tmp/under8.rows" "$tmp/fwd.rows" "$tmp/bwd.rows" "$tmp/decode.rows" "$tmp/sm90a.rows" "$tmp/ladder.rows" "$tmp/res.rows"
  echo
  echo "## Turing PTX entries (fa2_<family>_ptx75.fatbin)"
  echo
  echo "The kernels of each family's compute_75 PTX, which the driver JITs for a newer GPU (ForcePath(75))."
  echo
  echo "| entry | image |"
  echo "|---|---|"
  for f in $families; do
    sed -nE "s/^\.visible \.entry ([A-Za-z0-9_]+)\(.*/| \1 | fa2_${f}_ptx75.fatbin |/p" "$tmp/$f.ptx75.ptx"
  done | LC_ALL=C sort
} >"$tmp/resources.md"

"$tmp/tiles" go >"$tmp/table_gen.go"

files=(fa2_sm90a.cubin resources.md table_gen.go)
for f in $families; do files+=("fa2_$f.fatbin" "fa2_${f}_ptx75.fatbin"); done
(cd "$tmp" && cp "${files[@]}" "$out/")
echo "build.sh: wrote $out/{$(IFS=,; echo "${files[*]}")}" >&2

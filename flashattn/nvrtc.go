package flashattn

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/goflash/goflash/internal/kernels"
	"github.com/goflash/goflash/internal/nvrtc"
	kernelsrc "github.com/goflash/goflash/kernels"
)

// ErrNoNVRTC is wrapped by the error of CompileRung and LoadRungSource where
// NVRTC, CUDA's run-time compiler, cannot be loaded (or the CUDA headers it
// compiles against, cuda_fp16.h, are not found); the message says what to
// install. GOFLASH_LIBNVRTC names the library's path, GOFLASH_CUDA_INCLUDE
// the headers' directory.
var ErrNoNVRTC = nvrtc.ErrNoNVRTC

// ErrNVRTCArch is wrapped by the error of a compile for an architecture the
// NVRTC found is too old to know (an *NVRTCArchError).
var ErrNVRTCArch = nvrtc.ErrArch

// CompileError is a rung source that NVRTC did not compile: its log, and
// each diagnostic with the file (e.g. "ladder/rung4_ldmatrix.cuh") and line
// it points at. Error() shows the log with each offending line quoted.
type CompileError = nvrtc.CompileError

// CompileDiagnostic is one error or warning of a CompileError.
type CompileDiagnostic = nvrtc.Diagnostic

// NVRTCArchError says which architectures the NVRTC found can compile for.
type NVRTCArchError = nvrtc.ArchError

// RungFile is the file of rung's source relative to kernels/ (the name
// CompileError's diagnostics give and LoadRungFiles takes):
// "ladder/rung4_ldmatrix.cuh" for rung 4, "fwd.cuh" for the shipped kernel
// (the last rung); "" for a rung that does not exist.
func RungFile(rung int) string {
	if rung < 1 || rung > len(ladder) {
		return ""
	}
	return strings.TrimPrefix(ladder[rung-1].Source, "kernels/")
}

// RungSource is the CUDA source of ladder rung 1..len(Ladder()) as shipped
// (the text of its RungFile, embedded in the binary): what a learner edits
// and gives to Device.LoadRungSource. "" for a rung that does not exist.
func RungSource(rung int) string { return KernelSource(RungFile(rung)) }

// KernelSource is the shipped text of a kernel file by its name relative to
// kernels/ ("traits.cuh", "ladder/common.cuh"); "" where there is none.
// Device.LoadRungFiles takes edited copies of these.
func KernelSource(name string) string {
	s, _ := kernelsrc.File(name)
	return s
}

// KernelSourceNames lists the kernel files KernelSource has, sorted.
func KernelSourceNames() []string { return kernelsrc.Names() }

// RungBuild is a ladder rung compiled at run time by NVRTC from an edited
// source (CompileRung, Device.LoadRungSource).
type RungBuild struct {
	Rung  int
	Arch  int    // the compute_XX the PTX was compiled for
	Path  int    // the kernel path compiled: the shipped kernel's traits row (75 or 80); rungs 1-4 have one code for both
	NVRTC string // the library's CUDA release, e.g. "12.4"
	// Edited lists the kernel files (RungFile names) that differ from the
	// shipped ones.
	Edited []string
	// Kernels has one entry per kernel compiled (each head dim, plain and
	// causal), with the tile the source declares (Br, Bc, Warps, dynamic
	// SmemBytes); after Device.LoadRungSource also what the driver made of
	// it: registers, shared memory, occupancy.
	Kernels []KernelStats
	PTX     string // NVRTC's output (what the driver compiles for the GPU)
	Log     string // NVRTC's warnings, "" when none (or Cached from disk)
	// Cached: the PTX came from the cache (same sources, options, arch and
	// NVRTC release); CompileTime is 0 then.
	Cached      bool
	CompileTime time.Duration
}

// KernelStats is a kernel's tile and resources: the table's (or an
// NVRTC-compiled source's) tile in KernelInfo, and once loaded on a device
// its static shared memory and its occupancy, how many of its CTAs and warps
// one SM holds at once.
type KernelStats struct {
	KernelInfo
	Loaded             bool // the fields below and KernelInfo's Registers, LocalBytes, BinaryArch are known
	NVRTC              bool // compiled at run time from an edited source (LoadRungSource)
	StaticSmemBytes    int  // __shared__ arrays, per CTA
	MaxThreadsPerBlock int  // the most threads a launch may have (registers, __launch_bounds__)
	BlocksPerSM        int  // resident CTAs per SM (cuOccupancyMaxActiveBlocksPerMultiprocessor)
	WarpsPerSM         int  // BlocksPerSM * Warps
	// Occupancy is WarpsPerSM over the SM's most resident warps (64 on
	// sm_80/90, 32 on sm_75).
	Occupancy float64
}

// SmemPerCTA is a CTA's shared memory: static plus dynamic bytes.
func (s KernelStats) SmemPerCTA() int { return s.StaticSmemBytes + s.SmemBytes }

func (s KernelStats) String() string {
	str := fmt.Sprintf("%s: Br %d Bc %d warps %d", s.Symbol, s.Br, s.Bc, s.Warps)
	if s.Loaded {
		str += fmt.Sprintf(", %d registers, %d B local, %d B shared, %d CTAs (%d warps) per SM = %.0f%% occupancy",
			s.Registers, s.LocalBytes, s.SmemPerCTA(), s.BlocksPerSM, s.WarpsPerSM, 100*s.Occupancy)
	} else {
		str += fmt.Sprintf(", %d B dynamic shared", s.SmemBytes)
	}
	return str
}

// Kernel is the entry of b for a head dim and mask, ok false where none
// (and for a nil *RungBuild).
func (b *RungBuild) Kernel(headDim int, causal bool) (KernelStats, bool) {
	if b == nil {
		return KernelStats{}, false
	}
	for _, k := range b.Kernels {
		if k.HeadDim == headDim && k.Causal == causal {
			return k, true
		}
	}
	return KernelStats{}, false
}

// CompileRung compiles src as ladder rung rung's source (RungFile(rung);
// the other kernel files as shipped) to PTX for compute_arch with NVRTC,
// without a GPU: what Device.LoadRungSource compiles, for any architecture
// (arch 75..79 compiles the shipped kernel's Turing path, 80 and above its
// sm_80 path). A source with errors is a *CompileError; without NVRTC the
// error wraps ErrNoNVRTC; an NVRTC too old for arch wraps ErrNVRTCArch.
func CompileRung(rung int, src string, arch int) (*RungBuild, error) {
	return CompileRungFiles(rung, map[string]string{RungFile(rung): src}, arch)
}

// CompileRungFiles is CompileRung with any kernel files edited: files maps
// names relative to kernels/ (RungFile(rung), "traits.cuh", ...) to their
// edited text; the others are as shipped.
func CompileRungFiles(rung int, files map[string]string, arch int) (*RungBuild, error) {
	if arch < 75 {
		return nil, &UnsupportedError{Backend: GPU, Feature: "compute capability", Value: fmt.Sprintf("compute_%d", arch),
			Reason: "the FA2 kernels need Turing (sm_75) or newer"}
	}
	return compileRung(rung, files, arch, kernels.Path(arch))
}

// rungCache holds every rung compiled in this process (and on disk, see
// nvrtc.DefaultCacheDir), made on first use.
var rungCache struct {
	once sync.Once
	c    *nvrtc.Cache
}

func nvrtcCache() *nvrtc.Cache {
	rungCache.once.Do(func() {
		if rungCache.c == nil {
			rungCache.c = nvrtc.NewCache(nvrtc.DefaultCacheDir())
		}
	})
	return rungCache.c
}

// loadNVRTC is the process's NVRTC (tests replace it).
var loadNVRTC = nvrtc.Load

// NVRTCVersion is the CUDA release of the NVRTC that CompileRung and
// LoadRungSource use (e.g. "12.4"), and the file it was loaded from; the
// error wraps ErrNoNVRTC where there is none. It needs no GPU.
func NVRTCVersion() (version, path string, err error) {
	lib, err := loadNVRTC()
	if err != nil {
		return "", "", err
	}
	return lib.VersionString(), lib.Path(), nil
}

// rungEntry is one kernel of a rung's translation unit: the table's row
// (symbol, head dim, mask) and the C++ expressions of its template and tile.
type rungEntry struct {
	v      kernels.Variant
	kernel string // the function template instance the entry calls
	tile   string // the tile type, whose kBr, kBc, kThreads the launch uses
	smem   string // its dynamic shared memory in bytes, an expression
	bounds string // __launch_bounds__'s arguments
}

// rungEntries are the kernels rung's translation unit defines on path: the
// ladder's fa2_ladder<rung>_d<D>[_causal] (ladder.cu's FA2_LADDER_KERNELS) or,
// for the last rung, the shipped fp16 forward of the path,
// fa2_fwd_sm<path>_d<D>[_causal] (fwd.cu's FA2_FWD).
func rungEntries(rung, path int) ([]rungEntry, error) {
	var out []rungEntry
	switch {
	case rung >= 1 && rung <= kernels.LadderRungs:
		for _, v := range kernels.LadderVariants() {
			if v.Rung != rung {
				continue
			}
			t := fmt.Sprintf("fa2::ladder::Rung%d", rung)
			out = append(out, rungEntry{v: v, kernel: fmt.Sprintf("%s::run<%d, %t>", t, v.HeadDim, v.Causal), tile: t, smem: "0", bounds: t + "::kThreads"})
		}
	case rung == len(ladder):
		for _, v := range kernels.Variants() {
			if v.Stage != kernels.Fwd || v.Mods != 0 || v.Packed || v.Arch != path || v.BF16 || v.Large {
				continue
			}
			t := fmt.Sprintf("FwdTraits<%d, %d>::type", path, v.HeadDim)
			out = append(out, rungEntry{v: v, kernel: fmt.Sprintf("fa2::arch_entry<%d, FwdParams, fa2::fwd_kernel<%s, %t>>", path, t, v.Causal),
				tile: t, smem: t + "::kSmemBytes", bounds: t + "::kThreads, " + t + "::kMinBlocks"})
		}
	default:
		return nil, &UnsupportedError{Backend: GPU, Feature: "ladder rung", Value: fmt.Sprint(rung),
			Reason: fmt.Sprintf("the kernel ladder has rungs 1 to %d", len(ladder))}
	}
	return out, nil
}

// tileName is the __device__ array of a kernel's tile in the PTX: Br, Bc,
// threads, dynamic shared memory bytes.
func tileName(symbol string) string { return "goflash_tile_" + symbol }

// rungProgram is the translation unit of rung on path: the standard
// headers nvcc would have included, the rung's file, and one extern "C"
// entry per kernel, as ladder.cu and fwd.cu define them, with its tile beside it.
func rungProgram(rung int, es []rungEntry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "// goflash_rung%d.cu: ladder rung %d compiled by NVRTC (flashattn.LoadRungSource).\n", rung, rung)
	b.WriteString("#include <cstdint>\n#include <cstddef>\n#include <cmath>\n")
	fmt.Fprintf(&b, "#include %q\n", RungFile(rung))
	for _, e := range es {
		fmt.Fprintf(&b, "extern \"C\" __global__ void __launch_bounds__(%s) %s(const FwdParams p) { %s(p); }\n", e.bounds, e.v.Symbol, e.kernel)
		fmt.Fprintf(&b, "extern \"C\" __device__ const int %s[4] = {%s::kBr, %s::kBc, %s::kThreads, %s};\n", tileName(e.v.Symbol), e.tile, e.tile, e.tile, e.smem)
	}
	return b.String()
}

// compileRung compiles rung with files edited for compute_arch on path.
func compileRung(rung int, files map[string]string, arch, path int) (*RungBuild, error) {
	es, err := rungEntries(rung, path)
	if err != nil {
		return nil, err
	}
	names := kernelsrc.Names()
	for _, n := range slices.Sorted(maps.Keys(files)) {
		if !slices.Contains(names, n) {
			return nil, fmt.Errorf("flashattn: no kernel file %q to replace (KernelSourceNames lists them)", n)
		}
		if strings.TrimSpace(files[n]) == "" {
			return nil, fmt.Errorf("flashattn: the source given for %s is empty", n)
		}
	}
	lib, err := loadNVRTC()
	if err != nil {
		return nil, err
	}
	incl, _, ok := lib.IncludeOptions()
	if !ok {
		return nil, fmt.Errorf("%w: NVRTC %s (%s) is here, but not CUDA's cuda_fp16.h, which the kernels include: %s",
			ErrNoNVRTC, lib.VersionString(), lib.Path(), nvrtc.InstallHint)
	}
	b := &RungBuild{Rung: rung, Arch: arch, Path: path, NVRTC: lib.VersionString()}
	hdrs := nvrtc.StdHeaders()
	for _, n := range names {
		src, _ := kernelsrc.File(n)
		if e, ok := files[n]; ok && e != src {
			src = e
			b.Edited = append(b.Edited, n)
		}
		hdrs = append(hdrs, nvrtc.Header{Name: n, Source: src})
	}
	prog := nvrtc.Program{
		Name:    fmt.Sprintf("goflash_rung%d.cu", rung),
		Source:  rungProgram(rung, es),
		Headers: hdrs,
		Options: append(incl, "-std=c++17", "-default-device"),
	}
	start := time.Now()
	out, cached, err := nvrtcCache().CompilePTX(lib, prog, arch)
	if err != nil {
		return nil, err
	}
	if !cached {
		b.CompileTime = time.Since(start)
	}
	b.Cached, b.PTX, b.Log = cached, strings.TrimRight(string(out.PTX), "\x00"), out.Log
	for _, e := range es {
		t, err := ptxTile(b.PTX, e.v.Symbol)
		if err != nil {
			return nil, err
		}
		if err := checkTile(rung, e.v.Symbol, t); err != nil {
			return nil, err
		}
		ki := kernelInfo(e.v)
		ki.Br, ki.Bc, ki.Warps, ki.SmemBytes = t[0], t[1], t[2]/32, t[3]
		ki.FromPTX = true
		if rung == len(ladder) {
			ki.Rung = 0
		} else {
			ki.Path = path
		}
		b.Kernels = append(b.Kernels, KernelStats{KernelInfo: ki, NVRTC: true})
	}
	return b, nil
}

// ptxArray matches a __device__ int array's initialiser in PTX, as bytes
// (.b8 name[16] = {64, 0, 0, 0, ...}) or words (.u32 name[4] = {64, ...}).
var ptxArray = regexp.MustCompile(`\.(?:global|const) \.align \d+ \.(b8|u32|b32|s32) (\w+)\[(\d+)\] = \{([^}]*)\}`)

// ptxTile reads the tile array of symbol from the PTX.
func ptxTile(ptx, symbol string) ([4]int, error) {
	var t [4]int
	want := tileName(symbol)
	for _, m := range ptxArray.FindAllStringSubmatch(ptx, -1) {
		if m[2] != want {
			continue
		}
		size, _ := strconv.Atoi(m[3])
		if size != 16 && size != 4 || size == 16 && m[1] != "b8" || size == 4 && m[1] == "b8" {
			return t, fmt.Errorf("flashattn: %s in the PTX: %q", want, m[0])
		}
		// The initialiser may stop at its last non-zero element (newer NVRTCs).
		vals := make([]int, size)
		for i, f := range strings.Split(m[4], ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || i >= size {
				return t, fmt.Errorf("flashattn: %s in the PTX: %q", want, m[0])
			}
			vals[i] = n
		}
		if m[1] == "b8" {
			for i := range t {
				t[i] = int(int32(uint32(vals[4*i]) | uint32(vals[4*i+1])<<8 | uint32(vals[4*i+2])<<16 | uint32(vals[4*i+3])<<24))
			}
			return t, nil
		}
		copy(t[:], vals)
		return t, nil
	}
	return t, fmt.Errorf("flashattn: the PTX has no %s (the tile of %s)", want, symbol)
}

// checkTile refuses a tile the launch cannot run: the launch is Br rows per
// CTA and kThreads/32 warps.
func checkTile(rung int, symbol string, t [4]int) error {
	why := ""
	switch {
	case t[0] < 1:
		why = fmt.Sprintf("kBr is %d: a CTA needs at least one query row", t[0])
	case t[2] < 32 || t[2] > 1024 || t[2]%32 != 0:
		why = fmt.Sprintf("kThreads is %d: the launch runs whole warps, 32 to 1024 threads", t[2])
	case t[3] < 0:
		why = fmt.Sprintf("dynamic shared memory is %d bytes", t[3])
	}
	if why == "" {
		return nil
	}
	return &UnsupportedError{Backend: GPU, Feature: "rung tile", Value: symbol, Reason: fmt.Sprintf("rung %d: %s", rung, why)}
}

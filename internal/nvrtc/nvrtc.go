// Package nvrtc is GoFlash's binding to NVRTC, CUDA's run-time compiler,
// loaded at run time with purego as internal/cuda loads the driver (no cgo,
// no CUDA headers or libraries at build time). It compiles CUDA C++ to PTX
// for a compute_XX architecture; the driver (cuda.Context.LoadModule) turns
// the PTX into machine code for the GPU.
//
// The library is found by Load: GOFLASH_LIBNVRTC when set, else libnvrtc by
// its names on the loader's path, then where CUDA toolkits and Python
// wheels keep it (LibraryPaths). Without it every entry point returns an
// error wrapping ErrNoNVRTC. A failed compile is a *CompileError holding
// NVRTC's log, each diagnostic parsed with its file and line. An
// architecture the library cannot compile for is an *ArchError.
package nvrtc

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/goflash/goflash/internal/dl"
)

// ErrNoNVRTC is wrapped by every error caused by a missing or unusable NVRTC
// library (or, for a compile, by the CUDA headers it needs being absent).
var ErrNoNVRTC = errors.New("nvrtc: no usable NVRTC library")

// ErrArch is wrapped by *ArchError: the library cannot compile for the
// architecture asked for (it is older than the GPU).
var ErrArch = errors.New("nvrtc: architecture not supported by this NVRTC")

// Result is an nvrtcResult code.
type Result int32

// nvrtcResult codes the package inspects by value.
const (
	Success            Result = 0
	ErrOutOfMemory     Result = 1
	ErrInvalidOption   Result = 5
	ErrCompilation     Result = 6
	ErrBuiltinFailure  Result = 7 // libnvrtc-builtins missing or of another version
	ErrInternal        Result = 11
	maxKnownResultCode        = 64
)

// Error is a failed NVRTC call other than a compile with diagnostics: the
// entry point, its nvrtcResult and NVRTC's description of it.
type Error struct {
	Func    string
	Code    Result
	Message string
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("nvrtc: %s: %s (%d)", e.Func, e.Message, int(e.Code))
	if e.Code == ErrBuiltinFailure {
		msg += " (libnvrtc-builtins of the same CUDA release must be beside libnvrtc or on the loader's path)"
	}
	return msg
}

// ArchError says the library cannot compile for compute_Arch.
type ArchError struct {
	Arch      int
	Version   string // the library's CUDA release, e.g. "11.8"
	Supported []int  // the architectures it can compile for
}

func (e *ArchError) Error() string {
	return fmt.Sprintf("nvrtc: NVRTC %s cannot compile for compute_%d (it knows %s): a newer CUDA toolkit's NVRTC is needed",
		e.Version, e.Arch, archList(e.Supported))
}

// Unwrap makes errors.Is(err, ErrArch) true.
func (e *ArchError) Unwrap() error { return ErrArch }

func archList(as []int) string {
	if len(as) == 0 {
		return "no list"
	}
	return fmt.Sprintf("compute_%d to compute_%d", as[0], as[len(as)-1])
}

// Library is a loaded NVRTC.
type Library struct {
	path         string
	major, minor int
	archs        []int // ascending; nil when the library cannot list them (before 11.2)

	nvrtcVersion, nvrtcGetErrorString                 uintptr
	nvrtcCreateProgram, nvrtcDestroyProgram           uintptr
	nvrtcCompileProgram                               uintptr
	nvrtcGetPTXSize, nvrtcGetPTX                      uintptr
	nvrtcGetProgramLogSize, nvrtcGetProgramLog        uintptr
	nvrtcGetNumSupportedArchs, nvrtcGetSupportedArchs uintptr // optional
	// errorString is nvrtcGetErrorString, which returns a C string.
	errorString func(Result) string
}

// Path is the file (or name) the library was loaded from.
func (l *Library) Path() string { return l.path }

// Version is the CUDA release of the library, e.g. 12, 4.
func (l *Library) Version() (major, minor int) { return l.major, l.minor }

// VersionString is Version as "12.4".
func (l *Library) VersionString() string { return fmt.Sprintf("%d.%d", l.major, l.minor) }

// SupportedArchs lists, ascending, the compute_XX the library compiles for
// (nil for a library before CUDA 11.2, which cannot say).
func (l *Library) SupportedArchs() []int { return append([]int(nil), l.archs...) }

// Supports says whether the library can compile for compute_arch (true
// when it cannot say).
func (l *Library) Supports(arch int) bool {
	if l.archs == nil {
		return true
	}
	for _, a := range l.archs {
		if a == arch {
			return true
		}
	}
	return false
}

// MaxArch is the newest architecture the library compiles for (0 when it
// cannot say).
func (l *Library) MaxArch() int {
	if len(l.archs) == 0 {
		return 0
	}
	return l.archs[len(l.archs)-1]
}

// Open loads the first of paths that opens and binds NVRTC's entry points.
// Errors wrap ErrNoNVRTC.
func Open(paths ...string) (*Library, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("%w: no path to load it from", ErrNoNVRTC)
	}
	var lib uintptr
	var path string
	var why []string
	for _, p := range paths {
		h, err := dl.Open(p)
		if err == nil {
			lib, path = h, p
			break
		}
		why = append(why, err.Error())
	}
	if lib == 0 {
		msg := fmt.Sprintf("cannot load %s: %s", paths[0], why[0])
		if len(paths) > 1 {
			msg += fmt.Sprintf("; nor %d other places it is kept (%s names another path)", len(paths)-1, LibraryEnv)
		}
		return nil, fmt.Errorf("%w: %s. %s", ErrNoNVRTC, msg, InstallHint)
	}
	l := &Library{path: path}
	syms := []struct {
		name     string
		addr     *uintptr
		optional bool
	}{
		{"nvrtcVersion", &l.nvrtcVersion, false},
		{"nvrtcGetErrorString", &l.nvrtcGetErrorString, false},
		{"nvrtcCreateProgram", &l.nvrtcCreateProgram, false},
		{"nvrtcDestroyProgram", &l.nvrtcDestroyProgram, false},
		{"nvrtcCompileProgram", &l.nvrtcCompileProgram, false},
		{"nvrtcGetPTXSize", &l.nvrtcGetPTXSize, false},
		{"nvrtcGetPTX", &l.nvrtcGetPTX, false},
		{"nvrtcGetProgramLogSize", &l.nvrtcGetProgramLogSize, false},
		{"nvrtcGetProgramLog", &l.nvrtcGetProgramLog, false},
		{"nvrtcGetNumSupportedArchs", &l.nvrtcGetNumSupportedArchs, true},
		{"nvrtcGetSupportedArchs", &l.nvrtcGetSupportedArchs, true},
	}
	for _, s := range syms {
		p, err := dl.Sym(lib, s.name)
		if err == nil && p != 0 {
			*s.addr = p
		} else if !s.optional {
			dl.Close(lib)
			return nil, fmt.Errorf("%w: %s does not export %s (not an NVRTC library?)", ErrNoNVRTC, path, s.name)
		}
	}
	dl.RegisterFunc(&l.errorString, l.nvrtcGetErrorString)
	var major, minor int32
	if err := l.check("nvrtcVersion", l.call(l.nvrtcVersion, uintptr(unsafe.Pointer(&major)), uintptr(unsafe.Pointer(&minor)))); err != nil {
		dl.Close(lib)
		return nil, fmt.Errorf("%w: %w", ErrNoNVRTC, err)
	}
	l.major, l.minor = int(major), int(minor)
	if l.nvrtcGetNumSupportedArchs != 0 && l.nvrtcGetSupportedArchs != 0 {
		var n int32
		if l.call(l.nvrtcGetNumSupportedArchs, uintptr(unsafe.Pointer(&n))) == Success && n > 0 && n < 256 {
			as := make([]int32, n)
			if l.call(l.nvrtcGetSupportedArchs, uintptr(unsafe.Pointer(&as[0]))) == Success {
				for _, a := range as {
					l.archs = append(l.archs, int(a))
				}
			}
		}
	}
	return l, nil
}

var (
	defaultOnce sync.Once
	defaultLib  *Library
	defaultErr  error
)

// Load returns the process-wide library, loading it on first use from
// LibraryPaths. A failure is remembered, as internal/cuda remembers a
// missing driver.
func Load() (*Library, error) {
	defaultOnce.Do(func() { defaultLib, defaultErr = Open(LibraryPaths(nil)...) })
	return defaultLib, defaultErr
}

// call runs one entry point; the result is the low 32 bits of the return
// register (nvrtcResult is a C enum).
//
//go:uintptrescapes
func (l *Library) call(fn uintptr, args ...uintptr) Result {
	return Result(int32(uint32(dl.Call(fn, args...))))
}

// check turns an nvrtcResult into nil or an *Error named after fn.
func (l *Library) check(fn string, r Result) error {
	if r == Success {
		return nil
	}
	e := &Error{Func: fn, Code: r, Message: "unrecognized error code"}
	if r >= 0 && r < maxKnownResultCode && l.errorString != nil {
		if m := l.errorString(r); m != "" {
			e.Message = m
		}
	}
	return e
}

// cstr is s as a NUL-terminated byte slice.
func cstr(s string) []byte { return append([]byte(s), 0) }

// Header is a file the program #includes, by the name it is included as.
type Header struct {
	Name   string
	Source string
}

// Program is one translation unit: its name (the file name diagnostics
// give), its source, the headers it may include (in place of files) and
// NVRTC options besides the architecture.
type Program struct {
	Name    string
	Source  string
	Headers []Header
	Options []string
}

// Output is a compiled program.
type Output struct {
	PTX  []byte // NUL-terminated PTX text
	Log  string // NVRTC's log: warnings, "" when none
	Arch int    // the compute_XX it was compiled for
}

// ArchOption is the option that selects compute_arch.
func ArchOption(arch int) string { return fmt.Sprintf("--gpu-architecture=compute_%d", arch) }

// CompilePTX compiles p to PTX for compute_arch. A compile with errors is a
// *CompileError; an architecture the library does not know an *ArchError.
// Quoted includes are first looked up beside the including file, as a C
// preprocessor does (a header "ladder/a.cuh" that includes "../b.cuh" gets
// the header "b.cuh"), then by the name as written.
func (l *Library) CompilePTX(p Program, arch int) (*Output, error) {
	if l == nil {
		return nil, fmt.Errorf("%w: no library loaded", ErrNoNVRTC)
	}
	if !l.Supports(arch) {
		return nil, &ArchError{Arch: arch, Version: l.VersionString(), Supported: l.SupportedArchs()}
	}
	p = resolveIncludes(p)
	var pin runtime.Pinner
	defer pin.Unpin()
	// Every C string and pointer array lives in Go memory pinned for the calls.
	cs := func(s string) uintptr {
		b := cstr(s)
		pin.Pin(&b[0])
		return uintptr(unsafe.Pointer(&b[0]))
	}
	arr := func(ss []string) (uintptr, []uintptr) {
		if len(ss) == 0 {
			return 0, nil
		}
		ps := make([]uintptr, len(ss))
		for i, s := range ss {
			ps[i] = cs(s)
		}
		pin.Pin(&ps[0])
		return uintptr(unsafe.Pointer(&ps[0])), ps
	}
	names, srcs := make([]string, len(p.Headers)), make([]string, len(p.Headers))
	for i, h := range p.Headers {
		names[i], srcs[i] = h.Name, h.Source
	}
	hdrs, hkeep := arr(srcs)
	incs, ikeep := arr(names)
	name := p.Name
	if name == "" {
		name = "program.cu"
	}
	var prog uintptr
	if err := l.check("nvrtcCreateProgram", l.call(l.nvrtcCreateProgram, uintptr(unsafe.Pointer(&prog)), cs(p.Source), cs(name),
		uintptr(len(p.Headers)), hdrs, incs)); err != nil {
		return nil, err
	}
	defer l.call(l.nvrtcDestroyProgram, uintptr(unsafe.Pointer(&prog)))
	opts := append([]string{ArchOption(arch)}, p.Options...)
	optv, okeep := arr(opts)
	r := l.call(l.nvrtcCompileProgram, prog, uintptr(len(opts)), optv)
	runtime.KeepAlive(hkeep)
	runtime.KeepAlive(ikeep)
	runtime.KeepAlive(okeep)
	log, logErr := l.log(prog)
	if r == ErrCompilation {
		ce := &CompileError{Program: name, Arch: arch, Log: log, Lines: ParseLog(log), sources: map[string]string{name: p.Source}}
		for _, h := range p.Headers {
			ce.sources[h.Name] = h.Source
		}
		return nil, ce
	}
	if r == ErrInvalidOption && strings.Contains(log, "compute_") && !strings.Contains(log, "-std") {
		return nil, &ArchError{Arch: arch, Version: l.VersionString(), Supported: l.SupportedArchs()}
	}
	if err := l.check("nvrtcCompileProgram", r); err != nil {
		if log != "" {
			return nil, fmt.Errorf("%w; log: %s", err, log)
		}
		return nil, err
	}
	if logErr != nil {
		return nil, logErr
	}
	var n uintptr
	if err := l.check("nvrtcGetPTXSize", l.call(l.nvrtcGetPTXSize, prog, uintptr(unsafe.Pointer(&n)))); err != nil {
		return nil, err
	}
	if n == 0 || n > 1<<30 {
		return nil, fmt.Errorf("nvrtc: nvrtcGetPTXSize: %d bytes", n)
	}
	ptx := make([]byte, n)
	if err := l.check("nvrtcGetPTX", l.call(l.nvrtcGetPTX, prog, uintptr(unsafe.Pointer(&ptx[0])))); err != nil {
		return nil, err
	}
	return &Output{PTX: ptx, Log: log, Arch: arch}, nil
}

// log reads the program's log, trimmed.
func (l *Library) log(prog uintptr) (string, error) {
	var n uintptr
	if err := l.check("nvrtcGetProgramLogSize", l.call(l.nvrtcGetProgramLogSize, prog, uintptr(unsafe.Pointer(&n)))); err != nil {
		return "", err
	}
	if n <= 1 || n > 1<<28 {
		return "", nil
	}
	b := make([]byte, n)
	if err := l.check("nvrtcGetProgramLog", l.call(l.nvrtcGetProgramLog, prog, uintptr(unsafe.Pointer(&b[0])))); err != nil {
		return "", err
	}
	return strings.TrimSpace(strings.TrimRight(string(b), "\x00")), nil
}

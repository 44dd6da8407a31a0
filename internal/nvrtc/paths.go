package nvrtc

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
)

// LibraryEnv names the environment variable that gives libnvrtc's path, for
// a machine where LibraryPaths does not reach it.
const LibraryEnv = "GOFLASH_LIBNVRTC"

// IncludeEnv names the environment variable that gives the CUDA include
// directory (the one holding cuda_fp16.h), for a machine where IncludeDirs
// does not find it.
const IncludeEnv = "GOFLASH_CUDA_INCLUDE"

// InstallHint says how to get NVRTC where it is missing.
const InstallHint = "NVRTC comes with the CUDA toolkit (Colab and Kaggle: /usr/local/cuda/lib64), with PyTorch's CUDA wheels " +
	"(pip install nvidia-cuda-nvrtc-cu12 nvidia-cuda-runtime-cu12, the second for cuda_fp16.h) and on Debian/Ubuntu " +
	"with apt-get install nvidia-cuda-toolkit; " + LibraryEnv + " names the library's path (" + IncludeEnv + " the headers')"

// maxCandidates bounds the paths LibraryPaths and IncludeDirs return: the
// globs below cover a few Python and CUDA installs, not a file system.
const maxCandidates = 64

// libraryNames are the library's names, newest CUDA first: the unversioned
// name is a development symlink, absent where only the runtime is installed.
func libraryNames(goos string) []string {
	if goos == "windows" {
		return []string{"nvrtc64_130_0.dll", "nvrtc64_120_0.dll", "nvrtc64_112_0.dll"}
	}
	return []string{"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2"}
}

// sitePackages are the globs of the Python package directories where pip
// puts NVIDIA's wheels (Colab, Kaggle: /usr/local/lib/python3.*/dist-packages;
// conda, venvs, pyenv, user installs), HOME and VIRTUAL_ENV and CONDA_PREFIX
// filled in by getenv.
func sitePackages(getenv func(string) string) []string {
	roots := []string{"/usr/local/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages",
		"/usr/lib/python3/dist-packages", "/opt/conda/lib/python3*/site-packages"}
	for _, env := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if v := getenv(env); v != "" {
			roots = append(roots, filepath.Join(v, "lib/python3*/site-packages"))
		}
	}
	if h := getenv("HOME"); h != "" {
		roots = append(roots, filepath.Join(h, ".local/lib/python3*/site-packages"),
			filepath.Join(h, ".pyenv/versions/*/lib/python3*/site-packages"))
	}
	return roots
}

// cudaRoots are the CUDA toolkit directories: CUDA_HOME and CUDA_PATH, then
// /usr/local/cuda and the versioned ones, newest first.
func cudaRoots(getenv func(string) string, glob func(string) []string) []string {
	var out []string
	for _, env := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if v := getenv(env); v != "" {
			out = append(out, v)
		}
	}
	out = append(out, "/usr/local/cuda")
	return append(out, glob("/usr/local/cuda-*")...)
}

// libraryDirs are the directories searched after the loader's own path.
func libraryDirs(getenv func(string) string, glob func(string) []string) []string {
	var dirs []string
	for _, r := range cudaRoots(getenv, glob) {
		dirs = append(dirs, filepath.Join(r, "lib64"), filepath.Join(r, "lib"))
	}
	for _, sp := range sitePackages(getenv) {
		// nvidia-cuda-nvrtc-cu11/12 wheels; CUDA 13's put every library in nvidia/cu13.
		dirs = append(dirs, glob(filepath.Join(sp, "nvidia/cuda_nvrtc/lib"))...)
		dirs = append(dirs, glob(filepath.Join(sp, "nvidia/cu1[3-9]/lib"))...)
	}
	if p := getenv("CONDA_PREFIX"); p != "" {
		dirs = append(dirs, filepath.Join(p, "lib"))
	}
	return append(dirs, "/opt/conda/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64")
}

// LibraryPaths are where Load looks for NVRTC, in order: LibraryEnv's path
// alone when set; else the library by its names (the loader's path:
// LD_LIBRARY_PATH, the ldconfig cache), then the files of those names that
// exist in the CUDA toolkits, Python wheels and system directories of
// libraryDirs. getenv nil is os.Getenv.
func LibraryPaths(getenv func(string) string) []string {
	if getenv == nil {
		getenv = os.Getenv
	}
	return libraryPaths(getenv, globDesc, exists)
}

func libraryPaths(getenv func(string) string, glob func(string) []string, exists func(string) bool) []string {
	if p := getenv(LibraryEnv); p != "" {
		return []string{p}
	}
	names := libraryNames(runtime.GOOS)
	out := append([]string(nil), names...)
	if runtime.GOOS == "windows" {
		for _, r := range []string{getenv("CUDA_PATH")} {
			if r != "" {
				for _, n := range names {
					out = append(out, filepath.Join(r, "bin", n), filepath.Join(r, "bin", "x64", n))
				}
			}
		}
		return out
	}
	seen := map[string]bool{}
	for _, d := range libraryDirs(getenv, glob) {
		for _, n := range names {
			p := filepath.Join(d, n)
			if !seen[p] && exists(p) {
				seen[p] = true
				out = append(out, p)
			}
			if len(out) >= maxCandidates {
				return out
			}
		}
	}
	return out
}

// globDesc is filepath.Glob, newest (highest-sorting) first and bounded.
func globDesc(pattern string) []string {
	m, _ := filepath.Glob(pattern)
	sort.Sort(sort.Reverse(sort.StringSlice(m)))
	if len(m) > 16 {
		m = m[:16]
	}
	return m
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// loadedFile is the file the process mapped for a library loaded by name
// (/proc/self/maps), "" where it cannot tell.
func loadedFile(name string) string {
	if filepath.IsAbs(name) || runtime.GOOS != "linux" {
		return name
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return ""
	}
	defer f.Close()
	base := strings.TrimSuffix(name, filepath.Ext(name)) // libnvrtc.so.12 -> libnvrtc.so, libnvrtc.so -> libnvrtc
	s := bufio.NewScanner(f)
	for s.Scan() {
		fs := strings.Fields(s.Text())
		if len(fs) < 6 {
			continue
		}
		p := fs[len(fs)-1]
		b := filepath.Base(p)
		if strings.HasPrefix(b, "libnvrtc.so") && strings.HasPrefix(b, base) {
			return p
		}
	}
	return ""
}

// IncludeDirs are the directories that hold CUDA's cuda_fp16.h for this
// library, in order of preference: IncludeEnv's alone when set, else the
// toolkit or wheel beside the library (the same CUDA release), then the
// usual toolkit and system places. Each is returned only where cuda_fp16.h
// is there.
func (l *Library) IncludeDirs() []string {
	path := ""
	if l != nil {
		path = loadedFile(l.path)
	}
	return includeDirs(path, os.Getenv, globDesc, exists)
}

func includeDirs(libFile string, getenv func(string) string, glob func(string) []string, exists func(string) bool) []string {
	if p := getenv(IncludeEnv); p != "" {
		return []string{p}
	}
	var cand []string
	if libFile != "" {
		real, err := filepath.EvalSymlinks(libFile)
		if err != nil {
			real = libFile
		}
		for _, f := range []string{libFile, real} {
			d := filepath.Dir(f)
			// lib64 -> include; targets/<t>/lib -> targets/<t>/include; a wheel's
			// nvidia/cuda_nvrtc/lib -> nvidia/cuda_runtime/include (cu13: nvidia/cu13/include).
			cand = append(cand, filepath.Join(d, "../include"), filepath.Join(d, "../../cuda_runtime/include"),
				filepath.Join(d, "../../include"))
		}
	}
	for _, r := range cudaRoots(getenv, glob) {
		cand = append(cand, filepath.Join(r, "include"))
	}
	for _, sp := range sitePackages(getenv) {
		cand = append(cand, glob(filepath.Join(sp, "nvidia/cuda_runtime/include"))...)
		cand = append(cand, glob(filepath.Join(sp, "nvidia/cu1[3-9]/include"))...)
	}
	cand = append(cand, "/usr/include", "/opt/conda/include")
	var out []string
	seen := map[string]bool{}
	for _, c := range cand {
		c = filepath.Clean(c)
		if !seen[c] && exists(filepath.Join(c, "cuda_fp16.h")) {
			out = append(out, c)
		}
		seen[c] = true
		if len(out) >= maxCandidates {
			break
		}
	}
	return out
}

// IncludeOptions are the --include-path options for the library's CUDA
// headers: the first of IncludeDirs, and its cccl directory where CUDA 13
// keeps <nv/target> and <cuda/std/...>. ok is false where no directory
// holds cuda_fp16.h.
func (l *Library) IncludeOptions() (opts []string, dir string, ok bool) {
	dirs := l.IncludeDirs()
	if len(dirs) == 0 {
		return nil, "", false
	}
	opts = []string{"--include-path=" + dirs[0]}
	if exists(filepath.Join(dirs[0], "cccl")) {
		opts = append(opts, "--include-path="+filepath.Join(dirs[0], "cccl"))
	}
	return opts, dirs[0], true
}

// Package kernelsrc holds the CUDA sources of GoFlash's kernels (this
// directory's *.cuh and ladder/*.cuh), embedded so that a program can compile
// them at run time with NVRTC (flashattn's Device.LoadRungSource): the
// kernel ladder's rungs, which a learner edits, and the headers they
// include. The shipped kernels themselves are compiled ahead of time by
// build.sh into internal/kernels' images; nothing here is needed for them.
package kernelsrc

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

//go:embed *.cuh ladder/*.cuh
var files embed.FS

// Names lists the embedded files, sorted, by their paths relative to
// kernels/ ("params.cuh", "ladder/rung4_ldmatrix.cuh").
func Names() []string {
	var out []string
	_ = fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// File returns the text of an embedded file by its path relative to
// kernels/ (a "./" prefix or "dir/../" steps are cleaned away).
func File(name string) (string, bool) {
	b, err := files.ReadFile(path.Clean(name))
	if err != nil {
		return "", false
	}
	return string(b), true
}

// Rungs is the number of ladder rungs with sources here (ladder/rung1..4).
const Rungs = 4

// RungFile returns the path (relative to kernels/) of ladder rung n's
// source, 1 <= n <= Rungs.
func RungFile(n int) (string, error) {
	m, _ := fs.Glob(files, fmt.Sprintf("ladder/rung%d_*.cuh", n))
	if len(m) != 1 {
		return "", fmt.Errorf("kernelsrc: no source for ladder rung %d (rungs 1 to %d have one)", n, Rungs)
	}
	return m[0], nil
}

// Rung returns ladder rung n's source, as shipped.
func Rung(n int) (string, error) {
	name, err := RungFile(n)
	if err != nil {
		return "", err
	}
	src, _ := File(name)
	return src, nil
}

// Includes lists the quoted #include names of src, in order ("common.cuh",
// "../mask.cuh"); angle-bracket includes (<cuda_fp16.h>) are not listed.
func Includes(src string) []string {
	var out []string
	for _, line := range strings.Split(src, "\n") {
		l := strings.TrimSpace(line)
		if !strings.HasPrefix(l, "#") {
			continue
		}
		l = strings.TrimSpace(strings.TrimPrefix(l, "#"))
		if !strings.HasPrefix(l, "include") {
			continue
		}
		l = strings.TrimSpace(strings.TrimPrefix(l, "include"))
		if len(l) > 1 && l[0] == '"' {
			if i := strings.IndexByte(l[1:], '"'); i >= 0 {
				out = append(out, l[1:1+i])
			}
		}
	}
	return out
}

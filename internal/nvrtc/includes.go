package nvrtc

import (
	"path"
	"regexp"
)

// quotedInclude matches a quoted #include line; group 2 is the name.
var quotedInclude = regexp.MustCompile(`(?m)^([ \t]*#[ \t]*include[ \t]*")([^"\n]+)(")`)

// resolveIncludes gives quoted includes the C preprocessor's first search,
// the including file's directory, which NVRTC does not do for program
// headers (it matches the name as written): in the program and in every
// header, an include whose name joined to the file's directory names one of
// the headers is rewritten to that header's name ("ladder/rung4.cuh"'s
// "../mask.cuh" becomes "mask.cuh"). Every file then has one name, so its
// #pragma once holds; lines keep their numbers.
func resolveIncludes(p Program) Program {
	have := make(map[string]bool, len(p.Headers))
	for _, h := range p.Headers {
		have[h.Name] = true
	}
	fix := func(file, src string) string {
		dir := path.Dir(file)
		return quotedInclude.ReplaceAllStringFunc(src, func(m string) string {
			g := quotedInclude.FindStringSubmatch(m)
			j := path.Join(dir, g[2])
			if j == g[2] || !have[j] {
				return m
			}
			return g[1] + j + g[3]
		})
	}
	out := p
	out.Source = fix(p.Name, p.Source)
	out.Headers = make([]Header, len(p.Headers))
	for i, h := range p.Headers {
		out.Headers[i] = Header{Name: h.Name, Source: fix(h.Name, h.Source)}
	}
	return out
}

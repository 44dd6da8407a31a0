package nvrtc

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Diagnostic is one error or warning of NVRTC's log, where it points.
type Diagnostic struct {
	File     string // the program's or a header's name, as included
	Line     int    // 1-based
	Severity string // "error", "warning", "catastrophic error", "remark"
	Message  string
}

func (d Diagnostic) String() string {
	return fmt.Sprintf("%s(%d): %s: %s", d.File, d.Line, d.Severity, d.Message)
}

// CompileError is a compile that failed with diagnostics: NVRTC's whole log,
// and each diagnostic parsed from it.
type CompileError struct {
	Program string // the translation unit's name
	Arch    int    // compute_XX
	Log     string
	Lines   []Diagnostic

	sources map[string]string // the program's and headers' text, for Error's quotes
}

// Errors are the diagnostics of severity error (the compile's causes).
func (e *CompileError) Errors() []Diagnostic {
	var out []Diagnostic
	for _, d := range e.Lines {
		if strings.Contains(d.Severity, "error") {
			out = append(out, d)
		}
	}
	return out
}

// Error is NVRTC's log, and under each diagnostic whose file it has the
// line it points at, numbered: what a learner needs to find the mistake.
func (e *CompileError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "nvrtc: compiling %s for compute_%d failed", e.Program, e.Arch)
	if n := len(e.Errors()); n > 0 {
		fmt.Fprintf(&b, " with %d error(s)", n)
	}
	b.WriteString(":\n")
	for _, line := range strings.Split(e.Log, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
		d, ok := parseLine(line)
		if !ok {
			continue
		}
		if src, ok := e.sources[d.File]; ok {
			if text, ok := sourceLine(src, d.Line); ok {
				fmt.Fprintf(&b, "  %5d | %s\n", d.Line, text)
			}
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// logLine matches NVRTC's (EDG's) diagnostics: name(line): severity: message.
var logLine = regexp.MustCompile(`^(.+?)\((\d+)\): ((?:catastrophic )?error|warning|remark)(?: #[0-9A-Za-z_-]+(?:-D)?)?: (.*)$`)

func parseLine(s string) (Diagnostic, bool) {
	m := logLine.FindStringSubmatch(strings.TrimRight(s, "\r"))
	if m == nil {
		return Diagnostic{}, false
	}
	n, err := strconv.Atoi(m[2])
	if err != nil {
		return Diagnostic{}, false
	}
	return Diagnostic{File: m[1], Line: n, Severity: m[3], Message: m[4]}, true
}

// ParseLog returns the diagnostics of an NVRTC log, in order.
func ParseLog(log string) []Diagnostic {
	var out []Diagnostic
	for _, line := range strings.Split(log, "\n") {
		if d, ok := parseLine(line); ok {
			out = append(out, d)
		}
	}
	return out
}

// sourceLine is line n (1-based) of src, tabs as spaces.
func sourceLine(src string, n int) (string, bool) {
	if n < 1 {
		return "", false
	}
	lines := strings.Split(src, "\n")
	if n > len(lines) {
		return "", false
	}
	return strings.ReplaceAll(strings.TrimRight(lines[n-1], "\r"), "\t", "    "), true
}

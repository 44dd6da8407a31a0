package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// progress draws a one-line progress bar on a terminal. It draws nothing
// when w is not a terminal, so logs and pipes stay clean.
type progress struct {
	w     io.Writer
	on    bool
	total int
	done  int
	start time.Time
}

func newProgress(w io.Writer, total int) *progress {
	return &progress{w: w, on: isTerminal(w), total: total, start: time.Now()}
}

// isTerminal reports whether w is a character device (a TTY).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// begin shows that item label is being worked on.
func (p *progress) begin(label string) {
	if !p.on {
		return
	}
	const width = 24
	filled := 0
	if p.total > 0 {
		filled = width * p.done / p.total
	}
	bar := strings.Repeat("█", filled) + strings.Repeat("░", width-filled)
	eta := ""
	if p.done > 0 {
		left := time.Duration(float64(time.Since(p.start)) / float64(p.done) * float64(p.total-p.done))
		eta = " eta " + left.Round(time.Second).String()
	}
	fmt.Fprintf(p.w, "\r\x1b[K%s %d/%d %s%s", bar, p.done, p.total, label, eta)
}

// next marks one item done.
func (p *progress) next() { p.done++ }

// end clears the bar.
func (p *progress) end() {
	if p.on {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}

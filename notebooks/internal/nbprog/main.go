// Command nbprog turns a GoNB notebook into a standalone Go program, so that
// a notebook's code runs where there is no Go and no Jupyter (the GPU machine
// of colab/rehearse.sh) from a binary built elsewhere:
//
//	go run ./notebooks/internal/nbprog -o .build/nb07/main.go notebooks/07_benchmarks.ipynb
//	CGO_ENABLED=0 go build -o .build/nb07 .build/nb07/main.go
//
// See convert for how cells map to Go.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	out := flag.String("o", "", "write the program here (default: stdout)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: nbprog [-o main.go] NOTEBOOK.ipynb")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *out); err != nil {
		fmt.Fprintln(os.Stderr, "nbprog:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	data, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	src, err := convert(filepath.Base(in), data)
	if err != nil {
		return err
	}
	if out == "" {
		_, err = os.Stdout.Write(src)
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(out, src, 0o644)
}

package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/goflash/goflash/flashattn"
)

// Exit statuses (mainUsage lists them).
const (
	exitOK       = 0
	exitFailure  = 1 // the command ran and failed (a check failed, a file could not be written)
	exitUsage    = 2 // bad flags or impossible shapes
	exitTooLarge = 3 // a problem does not fit this machine's memory (host or GPU)
	// exitInterrupted is a run stopped by Ctrl-C or SIGTERM after writing
	// what it finished; 128+SIGINT, as a shell reports a process Ctrl-C ended.
	exitInterrupted = 130
)

// errInterrupted is a run stopped early by Ctrl-C or SIGTERM; it exits with
// status 130.
var errInterrupted = errors.New("interrupted")

// usageError is an error in what the user asked for; it exits with status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// tooLargeError is a problem too large for this machine's memory; it exits
// with status 3, as the library's *flashattn.MemoryError (host) and
// flashattn.ErrOutOfMemory (GPU) do.
type tooLargeError struct{ msg string }

func (e *tooLargeError) Error() string { return e.msg }

func tooLargef(format string, a ...any) error { return &tooLargeError{fmt.Sprintf(format, a...)} }

// exitCode is the exit status of a command's error.
func exitCode(err error) int {
	var ue *usageError
	var tl *tooLargeError
	var me *flashattn.MemoryError
	switch {
	case errors.As(err, &tl) || errors.As(err, &me) || errors.Is(err, flashattn.ErrOutOfMemory):
		return exitTooLarge
	case errors.As(err, &ue):
		return exitUsage
	case errors.Is(err, errInterrupted):
		return exitInterrupted
	}
	return exitFailure
}

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"demo", "attention on a sample sentence and random data; writes an HTML report (default)", runDemo},
		{"bench", "sweep shapes and time the kernels; JSON, CSV, HTML; --compare-torch adds PyTorch SDPA", runBench},
		{"check", "list GPUs and kernel variants, run a correctness self-test", runCheck},
		{"results", "regenerate the README's and docs' performance tables from perf/ (--check: verify them)", runResults},
	}
}

const mainUsage = `goflash: FlashAttention-2 in Go — demo, benchmarks and checks.

Usage:
  goflash [demo] [flags]    attention on a sample sentence and random data, HTML report
  goflash bench [flags]     time the kernels over shapes (--compare-torch: side by side with PyTorch SDPA)
  goflash check [flags]     list GPUs, the kernel variant per head dim, correctness self-test
  goflash results [--check] regenerate the performance tables and chart from perf/
  goflash help [command]    show help

Run 'goflash <command> --help' for a command's flags.

Exit status: 0 done; 1 failed (a check failed, a file could not be written);
2 bad usage; 3 too large for this machine (host memory beyond
flashattn.HostMemoryLimit, or the GPU's memory); 130 interrupted (Ctrl-C or
SIGTERM): bench writes the cases finished before it, marked partial (a
second Ctrl-C quits at once).
`

// run is the whole program: it parses args, runs a subcommand and returns the
// exit status. It never panics on user input; errors are one line on stderr.
func run(args []string, stdout, stderr io.Writer) int {
	name := "demo"
	switch {
	case len(args) > 0 && isHelp(args[0]):
		// The overview, then the flags of the default command.
		fmt.Fprint(stdout, mainUsage)
		fmt.Fprintln(stdout)
		args = args[:1]
	case len(args) > 0 && args[0] == "help":
		if len(args) == 1 {
			fmt.Fprint(stdout, mainUsage)
			return exitOK
		}
		name, args = args[1], []string{"--help"}
	case len(args) > 0 && !strings.HasPrefix(args[0], "-"):
		name, args = args[0], args[1:]
	}
	for _, c := range commands() {
		if c.name != name {
			continue
		}
		err := c.run(args, stdout, stderr)
		switch {
		case err == nil:
			return exitOK
		case errors.Is(err, flag.ErrHelp):
			return exitOK
		}
		fmt.Fprintf(stderr, "goflash %s: %s\n", name, oneLine(err.Error()))
		return exitCode(err)
	}
	fmt.Fprintf(stderr, "goflash: unknown command %q (want demo, bench, check, results or help)\n", name)
	return exitUsage
}

// printJSON writes v as a command's --json output.
// errNum is an error figure as JSON gives it: a number, or null where it is
// NaN or infinite (a broken kernel's), which encoding/json would refuse,
// losing the whole document when it matters most.
type errNum float64

func (x errNum) MarshalJSON() ([]byte, error) {
	if f := float64(x); math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(x))
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(v)
}

// checkWorkers refuses a --workers the library would refuse once the work
// has started (flashattn.Options.Workers: 0 to MaxWorkers), up front.
func checkWorkers(n int) error {
	if n < 0 || n > flashattn.MaxWorkers {
		return usagef("--workers %d: want 0 (GOMAXPROCS) to %d", n, flashattn.MaxWorkers)
	}
	return nil
}

func isHelp(s string) bool { return s == "-h" || s == "-help" || s == "--help" }

// oneLine keeps an error message on one line.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	return s
}

// flagSet is a subcommand's flags and its help text.
type flagSet struct {
	*flag.FlagSet
	name, synopsis string
	stdout         io.Writer
}

// newFlags returns a flag set that reports errors to the caller instead of
// printing or exiting; parseFlags prints the help on --help.
func newFlags(name, synopsis string, stdout io.Writer) *flagSet {
	fs := flag.NewFlagSet("goflash "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {} // errors are reported as one line by run
	return &flagSet{FlagSet: fs, name: name, synopsis: synopsis, stdout: stdout}
}

func (fs *flagSet) printUsage() {
	fmt.Fprintf(fs.stdout, "Usage: goflash %s [flags]\n\n%s\n\nFlags:\n", fs.name, strings.TrimSpace(fs.synopsis))
	fs.SetOutput(fs.stdout)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// parseFlags parses args; a bad flag or a stray argument is a usage error,
// --help prints the usage and returns flag.ErrHelp.
func parseFlags(fs *flagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.printUsage()
			return err
		}
		return &usageError{err.Error() + " (see --help)"}
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q (see --help)", fs.Arg(0))
	}
	return nil
}

// intList is a comma-separated list of integers, as a flag.
type intList []int

func (l *intList) String() string {
	if l == nil {
		return ""
	}
	s := make([]string, len(*l))
	for i, v := range *l {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}

func (l *intList) Set(s string) error {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil {
			return fmt.Errorf("%q is not an integer", f)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return errors.New("empty list")
	}
	*l = out
	return nil
}

// causalFlag is "false", "true" or "both".
type causalFlag []bool

func (c *causalFlag) String() string {
	if c == nil || len(*c) == 0 {
		return ""
	}
	if len(*c) == 2 {
		return "both"
	}
	return strconv.FormatBool((*c)[0])
}

func (c *causalFlag) Set(s string) error {
	switch strings.ToLower(s) {
	case "both":
		*c = []bool{false, true}
		return nil
	case "true", "yes", "1":
		*c = []bool{true}
		return nil
	case "false", "no", "0":
		*c = []bool{false}
		return nil
	}
	return fmt.Errorf("%q: want true, false or both", s)
}

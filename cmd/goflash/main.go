// Command goflash is GoFlash's main job: an attention demo with an HTML
// report (the default, and all a machine without a GPU needs), benchmarks
// of the FlashAttention-2 kernels against PyTorch's SDPA, and a device check.
//
//	goflash [demo] [flags]   attention on a sample sentence and random data, HTML report
//	goflash bench [flags]    sweep shapes, JSON/CSV/HTML results, --compare-torch
//	goflash check [flags]    list GPUs, kernel variants, correctness self-test
//
// Every subcommand takes --help. Errors go to stderr as one line and the
// exit status is non-zero: 2 for bad usage, 3 for a problem too large for
// this machine's memory, 130 for a bench run stopped by Ctrl-C (its files
// hold the finished cases, marked partial), 1 for any other failure while
// running.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

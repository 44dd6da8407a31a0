package bench

import (
	"fmt"
	"strings"
)

// CPUOptIn is the environment variable that lets a notebook's long work run
// on the CPU when no GPU is attached ("1"); CI sets it.
const CPUOptIn = "GOFLASH_CPU_OK"

// Hosts where the free T4s are, as Host names them.
const (
	HostColab  = "colab"
	HostKaggle = "kaggle"
)

// Host names the hosted runtime from its environment: HostColab,
// HostKaggle, or "" elsewhere.
func Host(getenv func(string) string) string {
	switch {
	case getenv("KAGGLE_KERNEL_RUN_TYPE") != "" || getenv("KAGGLE_URL_BASE") != "":
		return HostKaggle
	case getenv("COLAB_RELEASE_TAG") != "" || getenv("COLAB_GPU") != "":
		return HostColab
	}
	return ""
}

// AttachGPU says how to attach a GPU on the host (Host's names).
func AttachGPU(host string) string {
	switch host {
	case HostColab:
		return "Runtime → Change runtime type → T4 GPU → Save, then run the notebook again from the top"
	case HostKaggle:
		return "Settings → Accelerator → GPU T4 x2 (and Internet → on), then run the notebook again from the top"
	}
	return "run it on a machine with an NVIDIA GPU (sm_75 or newer), or open it on Colab or Kaggle with a T4"
}

// Gate decides whether a notebook goes on to its long GPU work. With a GPU
// (gpuErr nil) it does. Without one it stops, saying how to attach one,
// unless the user opted into the CPU run (CPUOptIn=1). msg says which, in a
// few lines.
func Gate(gpuErr error, getenv func(string) string) (proceed bool, msg string) {
	if gpuErr == nil {
		return true, "GPU found: the GPU cells will run."
	}
	var b strings.Builder
	fmt.Fprintf(&b, "No usable GPU: %v.\n", gpuErr)
	fmt.Fprintf(&b, "To attach one: %s.\n", AttachGPU(Host(getenv)))
	if getenv(CPUOptIn) == "1" {
		b.WriteString(CPUOptIn + "=1: going on with the CPU run (GPU cells say they are skipped).")
		return true, b.String()
	}
	fmt.Fprintf(&b, "Stopped here on purpose, before the long work. To run on the CPU anyway, set %s=1 (in a notebook: remove the // before %%env %s 1 at the top of this cell) and run again.", CPUOptIn, CPUOptIn)
	return false, b.String()
}

package flashattn_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/goflash/goflash/flashattn"
	"github.com/goflash/goflash/internal/cuda"
)

// torchInteropEnv names the file testdata/torch_interop.py writes: CUDA IPC
// handles of PyTorch allocations and the raw calls to run on them. The
// script runs this test binary as a child process and checks, in PyTorch,
// what the calls wrote into its tensors.
const torchInteropEnv = "GOFLASH_TORCH_INTEROP"

// interopFile is what testdata/torch_interop.py writes.
type interopFile struct {
	Handles []string      `json:"handles"` // hex cuIpcGetMemHandle of each PyTorch allocation (segment)
	Calls   []interopCall `json:"calls"`   // run in order on one stream
}

type interopCall struct {
	Name     string                `json:"name"`
	Backward bool                  `json:"backward"`
	DType    flashattn.DType       `json:"dtype"`
	Dims     flashattn.Dims        `json:"dims"`
	Causal   bool                  `json:"causal"`
	Ops      map[string]interopOps `json:"ops"` // q k v out lse, and dout dq dk dv di for the backward
}

// interopOps is one operand: Offset bytes into allocation Handle,
// element strides (tensors), and the Bytes the call may touch (0: ask the
// driver, as RawTensor.Bytes).
type interopOps struct {
	Handle  int               `json:"handle"`
	Offset  uint64            `json:"offset"`
	Strides flashattn.Strides `json:"strides"`
	Bytes   int               `json:"bytes"`
}

// TestGPUTorchInteropWithPyTorch runs testdata/torch_interop.py on this test
// binary where there is a GPU and a PyTorch that sees it (the GPU machine),
// so that TestGPUTorchInterop, its child, runs with the rest of the GPU
// tests and not only by hand. It skips without a GPU, and without PyTorch
// (saying so: that is not a pass on a machine that has it).
func TestGPUTorchInteropWithPyTorch(t *testing.T) {
	if os.Getenv(torchInteropEnv) != "" {
		t.Skip("this is the script's child: TestGPUTorchInterop runs the calls")
	}
	dev := openGPU(t)
	if out, err := exec.Command("python3", "-c", "import torch; assert torch.cuda.is_available()").CombinedOutput(); err != nil {
		t.Skipf("no PyTorch that sees a GPU here (%v): %s", err, lastLine(out))
	}
	if err := dev.Close(); err != nil { // the child opens the GPU itself
		t.Fatal(err)
	}
	out, err := exec.Command("python3", "testdata/torch_interop.py", os.Args[0], t.TempDir()).CombinedOutput()
	t.Logf("%s", out)
	if err != nil || !bytes.Contains(out, []byte("INTEROP PASS")) {
		t.Fatalf("testdata/torch_interop.py: %v, %s", err, lastLine(out))
	}
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	return s[strings.LastIndexByte(s, '\n')+1:]
}

// TestGPUTorchInterop runs the raw calls testdata/torch_interop.py asks
// for on PyTorch's own memory, mapped into this process through CUDA IPC
// (no copy): GoFlash reads PyTorch's q, k, v (and dO) and writes O, the
// LSE and the gradients into PyTorch's tensors, which the script then
// checks against PyTorch's SDPA. Skipped unless torchInteropEnv is set.
func TestGPUTorchInterop(t *testing.T) {
	path := os.Getenv(torchInteropEnv)
	if path == "" {
		t.Skipf("%s is not set: run flashattn/testdata/torch_interop.py", torchInteropEnv)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f interopFile
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	dev := openGPU(t)
	ctx, err := cuda.Open(dev.Info().Ordinal)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := ctx.Close(); err != nil { // unmaps what is still mapped
			t.Error(err)
		}
	}()
	bases := make([]*cuda.Buffer, len(f.Handles))
	for i, h := range f.Handles {
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != cuda.IPCHandleSize {
			t.Fatalf("handle %d: %q is not %d bytes of hex (%v)", i, h, cuda.IPCHandleSize, err)
		}
		if bases[i], err = ctx.OpenIPC([cuda.IPCHandleSize]byte(b)); err != nil {
			t.Fatalf("mapping PyTorch allocation %d: %v", i, err)
		}
		t.Logf("PyTorch allocation %d: %d bytes mapped at %#x", i, bases[i].Size(), bases[i].Ptr())
	}
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range f.Calls {
		at := func(name string) interopOps {
			op, ok := c.Ops[name]
			if !ok || op.Handle < 0 || op.Handle >= len(bases) {
				t.Fatalf("%s: operand %s missing or of no allocation", c.Name, name)
			}
			return op
		}
		tensor := func(name string) flashattn.RawTensor {
			op := at(name)
			return flashattn.RawTensor{Ptr: bases[op.Handle].Ptr() + op.Offset, Strides: op.Strides, Bytes: op.Bytes}
		}
		buffer := func(name string) flashattn.RawBuffer {
			op := at(name)
			return flashattn.RawBuffer{Ptr: bases[op.Handle].Ptr() + op.Offset, Bytes: op.Bytes}
		}
		o := &flashattn.Options{Causal: c.Causal}
		var kernels []flashattn.KernelInfo
		if c.Backward {
			plan, err := dev.NewRawBackward(c.Dims, c.DType, o)
			if err != nil {
				t.Fatalf("%s: %v", c.Name, err)
			}
			kernels = plan.Kernels()
			err = plan.Enqueue(s.Handle(), &flashattn.RawBackwardArgs{Q: tensor("q"), K: tensor("k"), V: tensor("v"),
				Out: tensor("out"), DOut: tensor("dout"), LSE: buffer("lse"),
				DQ: tensor("dq"), DK: tensor("dk"), DV: tensor("dv"), Di: buffer("di")})
			if err != nil {
				t.Fatalf("%s: %v", c.Name, err)
			}
		} else {
			plan, err := dev.NewRawForward(c.Dims, c.DType, o)
			if err != nil {
				t.Fatalf("%s: %v", c.Name, err)
			}
			kernels = []flashattn.KernelInfo{plan.Kernel()}
			err = plan.Enqueue(s.Handle(), &flashattn.RawForwardArgs{Q: tensor("q"), K: tensor("k"), V: tensor("v"),
				Out: tensor("out"), LSE: buffer("lse")})
			if err != nil {
				t.Fatalf("%s: %v", c.Name, err)
			}
		}
		var names []string
		for _, k := range kernels {
			if k.DType != c.DType {
				t.Errorf("%s: %v call ran %s (%v)", c.Name, c.DType, k.Symbol, k.DType)
			}
			names = append(names, k.Symbol)
		}
		t.Logf("%s: %v %+v causal %v: enqueued %v", c.Name, c.DType, c.Dims, c.Causal, names)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("GOFLASH_INTEROP_DONE %d calls on %d PyTorch allocations\n", len(f.Calls), len(f.Handles))
}

package cuda

import (
	"runtime"
	"testing"
)

// The driver checks a tensor map's address against the calling thread's
// current context: an encoder must make its context current itself, or an
// encoding goroutine the scheduler moved to a new OS thread (which has no
// current context) fails with CUDA_ERROR_INVALID_CONTEXT.
func TestGPUTensorMapOnAThreadWithoutContext(t *testing.T) {
	c := gpu(t)
	if !HasTensorMaps() {
		t.Skip("the driver has no cuTensorMapEncodeTiled (before CUDA 12)")
	}
	if major, _, err := c.ComputeCapability(); err != nil || major < 9 {
		t.Skipf("tensor maps are Hopper's (sm_%d): %v", major*10, err)
	}
	const rows, cols = 128, 64 // fp16: 128-byte rows, one swizzled box wide
	buf, err := c.Alloc(rows * cols * 2)
	if err != nil {
		t.Fatal(err)
	}
	e := c.NewTensorMapEncoder()
	for _, bf16 := range []bool{false, true} {
		encodeOnANewThread(t, c, e, bf16, buf.Ptr(), rows, cols)
	}
}

// encodeOnANewThread encodes a rows x cols map of 16-bit elements at ptr
// from a goroutine locked to a thread without a current context.
func encodeOnANewThread(t *testing.T, c *Context, e *TensorMapEncoder, bf16 bool, ptr uint64, rows, cols uint64) {
	t.Helper()
	done := make(chan error)
	go func() {
		// Locked and never unlocked: the thread ends with the goroutine,
		// taking the cleared state with it.
		runtime.LockOSThread()
		// What a new OS thread starts with: no current context.
		if err := c.d.check("cuCtxSetCurrent", c.d.call(c.d.cuCtxSetCurrent, 0)); err != nil {
			done <- err
			return
		}
		var m [TensorMapSize]byte
		done <- e.EncodeTiled16(&m, bf16, ptr, [4]uint64{cols, rows, 1, 1}, [3]uint64{cols * 2, rows * cols * 2, rows * cols * 2},
			[4]uint32{uint32(cols), 64, 1, 1})
	}()
	if err := <-done; err != nil {
		t.Fatalf("encoding (bf16 %v) on a thread without a current context: %v", bf16, err)
	}
}

package cuda

import (
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"testing"
)

// ipcChildEnv names the handle (hex) a child of TestGPUIPC maps.
const ipcChildEnv = "GOFLASH_CUDA_IPC_CHILD"

// TestGPUIPC: memory allocated and filled by one process (this test) is
// mapped by another (the test binary run again as a child, which sees the
// handle in ipcChildEnv), read there without a copy, and written there;
// the parent sees the child's writes. A zero handle is an error.
func TestGPUIPC(t *testing.T) {
	c := gpu(t)
	const n = 1 << 18 // words
	if h := os.Getenv(ipcChildEnv); h != "" {
		ipcChild(t, c, h, n)
		return
	}
	b, err := c.Alloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	src := make([]uint32, n)
	for i := range src {
		src[i] = uint32(3*i + 1)
	}
	if err := CopyToDevice(b, src); err != nil {
		t.Fatal(err)
	}
	h, err := c.ExportIPC(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.OpenIPC([IPCHandleSize]byte{}); err == nil {
		t.Error("OpenIPC of a zero handle succeeded")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestGPUIPC$", "-test.v")
	cmd.Env = append(os.Environ(), ipcChildEnv+"="+hex.EncodeToString(h[:]))
	out, err := cmd.CombinedOutput()
	t.Logf("child:\n%s", out)
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	got := make([]uint32, n)
	if err := CopyFromDevice(got, b); err != nil {
		t.Fatal(err)
	}
	for i, x := range got {
		want := src[i]
		if i < n/2 {
			want = uint32(7 * i)
		}
		if x != want {
			t.Fatalf("word %d after the child: %d, want %d", i, x, want)
		}
	}
}

// ipcChild maps the parent's allocation, checks what the parent wrote and
// overwrites its first half.
func ipcChild(t *testing.T, c *Context, hexHandle string, n int) {
	raw, err := hex.DecodeString(hexHandle)
	if err != nil || len(raw) != IPCHandleSize {
		t.Fatalf("handle %q: %v", hexHandle, err)
	}
	b, err := c.OpenIPC([IPCHandleSize]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if b.Size() < 4*n {
		t.Fatalf("mapped %d bytes, the parent allocated %d", b.Size(), 4*n)
	}
	got := make([]uint32, n)
	if err := CopyFromDevice(got, b); err != nil {
		t.Fatal(err)
	}
	for i, x := range got {
		if x != uint32(3*i+1) {
			t.Fatalf("word %d: %d, want %d", i, x, 3*i+1)
		}
	}
	half := make([]uint32, n/2)
	for i := range half {
		half[i] = uint32(7 * i)
	}
	if err := CopyToDevice(b, half); err != nil {
		t.Fatal(err)
	}
	if err := c.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if err := b.Free(); err != nil || !b.Freed() {
		t.Fatalf("unmapping: %v", err)
	}
	if err := CopyToDevice(b, half); !errors.Is(err, ErrClosed) {
		t.Errorf("copy into an unmapped buffer: %v, want ErrClosed", err)
	}
	t.Logf("mapped %d bytes at %#x from the parent: read its data, wrote %d words", b.Size(), b.ptr, len(half))
}

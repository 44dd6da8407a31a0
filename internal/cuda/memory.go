package cuda

import (
	"fmt"
	"sync"
	"unsafe"
)

// Buffer is one device allocation, or another process's allocation mapped
// into this one (OpenIPC).
type Buffer struct {
	c    *Context
	ptr  uint64 // CUdeviceptr
	size int
	ipc  bool // mapped by cuIpcOpenMemHandle: Free unmaps it

	mu    sync.Mutex
	freed bool
}

// Alloc allocates bytes of device memory.
func (c *Context) Alloc(bytes int) (*Buffer, error) {
	if bytes <= 0 {
		return nil, fmt.Errorf("cuda: Alloc of %d bytes", bytes)
	}
	b := &Buffer{c: c, size: bytes}
	if err := c.do("cuMemAlloc_v2", c.d.cuMemAlloc, uintptr(unsafe.Pointer(&b.ptr)), uintptr(bytes)); err != nil {
		return nil, err
	}
	if err := track(c, c.buffers, b, true); err != nil {
		return nil, err
	}
	return b, nil
}

// Ptr is the device address, for kernel parameters.
func (b *Buffer) Ptr() uint64 { return b.ptr }

// Size is the allocation's size in bytes.
func (b *Buffer) Size() int { return b.size }

// Freed reports whether Free was called.
func (b *Buffer) Freed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.freed
}

// Free releases the allocation (unmaps an OpenIPC mapping, leaving the
// memory to its owner); a second Free returns nil.
func (b *Buffer) Free() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.freed {
		return nil
	}
	name, fn := "cuMemFree_v2", b.c.d.cuMemFree
	if b.ipc {
		name, fn = "cuIpcCloseMemHandle", b.c.d.cuIpcCloseMemHandle
	}
	if err := b.c.do(name, fn, uintptr(b.ptr)); err != nil {
		return err
	}
	b.freed = true
	return track(b.c, b.c.buffers, b, false)
}

func (b *Buffer) live(bytes int) error {
	if b.Freed() {
		return ErrClosed
	}
	if bytes > b.size {
		return fmt.Errorf("cuda: copy of %d bytes into a buffer of %d", bytes, b.size)
	}
	return nil
}

// CopyToDevice copies src to the start of b; src's elements must be plain
// data (no Go pointers).
func CopyToDevice[T any](b *Buffer, src []T) error {
	n := len(src) * int(unsafe.Sizeof(*new(T)))
	if err := b.live(n); err != nil || n == 0 {
		return err
	}
	return b.c.do("cuMemcpyHtoD_v2", b.c.d.cuMemcpyHtoD, uintptr(b.ptr), uintptr(unsafe.Pointer(unsafe.SliceData(src))), uintptr(n))
}

// CopyFromDevice copies the start of b into dst. It waits for earlier work
// on the legacy default stream and on blocking streams.
func CopyFromDevice[T any](dst []T, b *Buffer) error {
	n := len(dst) * int(unsafe.Sizeof(*new(T)))
	if err := b.live(n); err != nil || n == 0 {
		return err
	}
	return b.c.do("cuMemcpyDtoH_v2", b.c.d.cuMemcpyDtoH, uintptr(unsafe.Pointer(unsafe.SliceData(dst))), uintptr(b.ptr), uintptr(n))
}

// CopyOnStream enqueues a copy of bytes from src at srcOff to dst at dstOff
// (byte offsets) on stream s: ordered with s's kernels, no host wait.
func CopyOnStream(dst *Buffer, dstOff int, src *Buffer, srcOff, bytes int, s *Stream) error {
	if dstOff < 0 || srcOff < 0 || bytes < 0 {
		return fmt.Errorf("cuda: copy of %d bytes at offsets %d, %d", bytes, dstOff, srcOff)
	}
	if err := dst.live(dstOff + bytes); err != nil || bytes == 0 {
		return err
	}
	if err := src.live(srcOff + bytes); err != nil {
		return err
	}
	return dst.c.do("cuMemcpyDtoDAsync_v2", dst.c.d.cuMemcpyDtoDAsync, uintptr(dst.ptr)+uintptr(dstOff), uintptr(src.ptr)+uintptr(srcOff), uintptr(bytes), s.h)
}

// Memset32 sets the first count 32-bit words of b to v.
func (b *Buffer) Memset32(v uint32, count int) error {
	if err := b.live(4 * count); err != nil || count == 0 {
		return err
	}
	return b.c.do("cuMemsetD32_v2", b.c.d.cuMemsetD32, uintptr(b.ptr), uintptr(v), uintptr(count))
}

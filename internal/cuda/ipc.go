package cuda

import (
	"fmt"
	"unsafe"
)

// CUDA IPC: device memory another process of the machine allocated and
// exported (cuIpcGetMemHandle, cudaIpcGetMemHandle: a 64-byte handle),
// mapped into this process without a copy. Linux only (the driver refuses
// it elsewhere); both processes use the same GPU.

// IPCHandleSize is the size of a CUipcMemHandle (cudaIpcMemHandle_t).
const IPCHandleSize = 64

// ipcHandle is CUipcMemHandle, which cuIpcOpenMemHandle takes by value.
type ipcHandle struct{ reserved [IPCHandleSize]byte }

// ipcLazyEnablePeerAccess is CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, the one
// flag cuIpcOpenMemHandle accepts (and the one cudaIpcOpenMemHandle needs).
const ipcLazyEnablePeerAccess = 1

// bindIPC binds the IPC entry points once.
func (d *driver) bindIPC() error {
	d.ipcOnce.Do(func() {
		var open uintptr
		for _, n := range []string{"cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle"} {
			if p, err := lookupSymbol(d.lib, n); err == nil && p != 0 {
				open = p
				break
			}
		}
		closeFn, err1 := lookupSymbol(d.lib, "cuIpcCloseMemHandle")
		get, err2 := lookupSymbol(d.lib, "cuIpcGetMemHandle")
		if open == 0 || err1 != nil || closeFn == 0 || err2 != nil || get == 0 {
			d.ipcErr = fmt.Errorf("%w: the driver does not export cuIpcOpenMemHandle, cuIpcCloseMemHandle and cuIpcGetMemHandle", ErrNoDriver)
			return
		}
		registerFunc(&d.ipcOpen, open)
		if d.ipcOpen == nil {
			d.ipcErr = fmt.Errorf("%w: no CUDA IPC on this platform", ErrNoDriver)
			return
		}
		d.cuIpcCloseMemHandle, d.cuIpcGetMemHandle = closeFn, get
	})
	return d.ipcErr
}

// OpenIPC maps the allocation another process exported as handle into this
// context (cuIpcOpenMemHandle): the returned Buffer addresses the owner's
// memory, starting at the exported allocation's base, with the size the
// driver reports for it. Nothing is copied; writes are seen by the owner.
// Free (or Close) unmaps it; the owner frees the memory. A handle of this
// process, of another GPU, or already mapped here is an *Error from the
// driver.
func (c *Context) OpenIPC(handle [IPCHandleSize]byte) (*Buffer, error) {
	if err := c.d.bindIPC(); err != nil {
		return nil, err
	}
	b := &Buffer{c: c, ipc: true}
	if err := c.enter(); err != nil {
		return nil, err
	}
	r := Result(c.d.ipcOpen(&b.ptr, ipcHandle{handle}, ipcLazyEnablePeerAccess))
	c.exit()
	if err := c.d.check("cuIpcOpenMemHandle", r); err != nil {
		return nil, err
	}
	if err := track(c, c.buffers, b, true); err != nil {
		return nil, err
	}
	start, size, _, err := c.AddressRange(b.ptr, NewProbe())
	if err == nil && start != b.ptr {
		err = fmt.Errorf("cuda: IPC mapping at %#x lies in an allocation from %#x", b.ptr, start)
	}
	if err != nil {
		_ = b.Free()
		return nil, err
	}
	b.size = int(size)
	return b, nil
}

// ExportIPC returns the handle another process passes to OpenIPC to map
// b's allocation (cuIpcGetMemHandle; b must be a Buffer of Alloc).
func (c *Context) ExportIPC(b *Buffer) (h [IPCHandleSize]byte, err error) {
	if err := c.d.bindIPC(); err != nil {
		return h, err
	}
	if err := b.live(0); err != nil {
		return h, err
	}
	return h, c.do("cuIpcGetMemHandle", c.d.cuIpcGetMemHandle, uintptr(unsafe.Pointer(&h)), uintptr(b.ptr))
}

package cuda

import (
	"fmt"
	"sync"
	"unsafe"
)

// Function attributes beyond module.go's: what a kernel compiled at run time
// (NVRTC) reports to the learner who edited it.
const (
	FuncMaxThreadsPerBlock FuncAttr = 0 // the most threads a launch may have (registers and __launch_bounds__)
	FuncSharedSizeBytes    FuncAttr = 1 // static shared memory per block
	FuncPTXVersion         FuncAttr = 5 // PTX ISA the function was compiled from, e.g. 80
)

// Device attributes for occupancy.
const (
	AttrMaxThreadsPerSM   DeviceAttr = 39
	AttrMaxRegistersPerSM DeviceAttr = 82
)

// occupancy binds cuOccupancyMaxActiveBlocksPerMultiprocessor on first use
// (every driver since CUDA 6.5 has it), per driver library.
var occupancy struct {
	mu  sync.Mutex
	fns map[uintptr]uintptr
}

func (d *driver) occupancyFn() (uintptr, error) {
	occupancy.mu.Lock()
	defer occupancy.mu.Unlock()
	if p := occupancy.fns[d.lib]; p != 0 {
		return p, nil
	}
	p, err := lookupSymbol(d.lib, "cuOccupancyMaxActiveBlocksPerMultiprocessor")
	if err != nil || p == 0 {
		return 0, fmt.Errorf("%w: the driver does not export cuOccupancyMaxActiveBlocksPerMultiprocessor", ErrNoDriver)
	}
	if occupancy.fns == nil {
		occupancy.fns = map[uintptr]uintptr{}
	}
	occupancy.fns[d.lib] = p
	return p, nil
}

// MaxActiveBlocksPerSM is how many blocks of blockSize threads, each with
// dynSmem bytes of dynamic shared memory, one multiprocessor holds at once
// (cuOccupancyMaxActiveBlocksPerMultiprocessor): the limit its registers,
// shared memory, threads and block slots set together.
func (f *Function) MaxActiveBlocksPerSM(blockSize, dynSmem int) (int, error) {
	fn, err := f.m.c.d.occupancyFn()
	if err != nil {
		return 0, err
	}
	var n int32
	if err := f.m.c.do("cuOccupancyMaxActiveBlocksPerMultiprocessor", fn, uintptr(unsafe.Pointer(&n)), f.h, uintptr(blockSize), uintptr(dynSmem)); err != nil {
		return 0, err
	}
	return int(n), nil
}

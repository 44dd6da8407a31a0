// Package cuda is GoFlash's binding to the CUDA driver API, loaded at run
// time with purego (no cgo, no CUDA headers or libraries at build time).
//
// It binds the driver's exported symbols by their exact names (the _v2
// names where the driver exports them) and turns every CUresult into an
// *Error. Without a driver, or without a device, every entry point returns
// an error wrapping ErrNoDriver or ErrNoDevice; nothing panics or exits.
//
// A Context is a retained primary context of one device. Each of its
// methods locks the calling goroutine to its OS thread and makes the context
// current there for the duration of the driver call, because goroutines
// move between threads and the driver's current context is per thread.
//
// No CUDA handle type leaves this package: device memory is a *Buffer,
// modules, functions, streams and events are opaque types owned by their
// Context, and Context.Close releases whatever is still alive. The one
// exception is interop with other CUDA code of the process: handles cross
// as plain integers (Stream.Handle; Function.LaunchOn on a CUstream;
// OwnsStream and AddressRange about streams and memory others made), and
// memory of other processes as the 64 bytes of a CUDA IPC handle
// (ExportIPC, OpenIPC, whose mapping is a *Buffer).
package cuda

// Package dl opens shared libraries and calls their C functions without cgo,
// through purego: what internal/cuda uses for the CUDA driver and
// internal/nvrtc for NVRTC. On Linux (amd64, arm64) it is purego's dlopen;
// on Windows the standard library's LoadLibrary with purego's calls; other
// platforms have no CUDA, and Open says so.
package dl

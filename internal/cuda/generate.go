package cuda

//go:generate nvcc -ptx -arch=compute_75 -o testdata/testkernels.ptx testdata/testkernels.cu

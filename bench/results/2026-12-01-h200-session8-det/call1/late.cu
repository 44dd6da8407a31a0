#define FA2_DET_RELEASE_LATE 1
#include "/work/main/kernels/dev/bwd_check.cu"

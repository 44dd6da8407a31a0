#include "trim.h"
#include "dev/bwd_check.cu"

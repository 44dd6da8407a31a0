#include "trim3.h"
#include "fa2.cu"

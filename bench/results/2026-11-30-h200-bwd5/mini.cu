#include "trim.h"
#include "fa2.cu"

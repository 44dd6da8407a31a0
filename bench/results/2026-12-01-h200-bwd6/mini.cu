#include "trim2.h"
#include "fa2.cu"

/* netbuf.c - placeholder, being written */
#include "pgvalve/common.h"

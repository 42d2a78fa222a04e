/* auth_file.c - placeholder, being written */
#include "pgvalve/common.h"

#include "harness.h"
int main(void) { return 0; }

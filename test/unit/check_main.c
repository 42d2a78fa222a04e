/*
 * check_main.c - the main() of every unit test binary: runs the file's
 * unit_suite() (check_main.h) with Check's normal output, the "NN%:
 * Checks: N, Failures: F, Errors: E" line scripts/test.sh totals, and
 * exits non-zero when a case failed.
 */
#include <stdlib.h>

#include "check_main.h"

int main(void)
{
	SRunner *sr = srunner_create(unit_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

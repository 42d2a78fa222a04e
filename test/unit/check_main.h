/*
 * check_main.h - what a unit test file gives the shared main() in
 * check_main.c: its Check suite. Every test/unit/test_*.c defines
 * unit_suite() and no main(); check_main.c is linked into each unit test
 * binary and runs that suite, so CK_RUN_SUITE, CK_RUN_CASE and the exit
 * status work the same in all of them.
 */
#ifndef PGVALVE_TEST_CHECK_MAIN_H
#define PGVALVE_TEST_CHECK_MAIN_H

#include <check.h>

/* The one suite of this test binary. */
Suite *unit_suite(void);

#endif

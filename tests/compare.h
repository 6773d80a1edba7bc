/*
 * Comparing two tensor files (.npy or .pb) for the shell tests: the
 * reference and the answer under test.  Used by tests/tensor_cmp (every
 * build) and by tests/test_mpi --compare (MPI builds).
 */
#ifndef SN_TESTS_COMPARE_H
#define SN_TESTS_COMPARE_H

#include <stdio.h>

/*
 * Do the tensors in the files `want` and `got` agree?  The same element
 * type and shape; integers and booleans equal; floats (float32, float64,
 * float16, bfloat16) bit for bit when `tol` is 0, else within `tol`
 * relative to 1 + |want|.  A NaN agrees only with a NaN where the
 * reference has one; an infinity only with the same infinity.
 * Prints one line to `report`: "identical", "within tolerance" or
 * "DIFFERENT" with the first element that differs, and the largest
 * relative difference.  Returns 0 when they agree, 1 when not, 2 when a
 * file cannot be read.
 */
int sn_test_compare(const char *want, const char *got, double tol,
                    FILE *report);

#endif

/*
 * tensor_cmp REFERENCE ANSWER [TOLERANCE]: do two tensor files agree (the
 * same type and shape; integers exactly; floats bit for bit, or within
 * TOLERANCE relative; a NaN only where the reference has one)?  For the
 * shell tests (tests/test_cli.sh); exit 0 when they agree, 1 when not, 2
 * when a file cannot be read or the arguments are wrong.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>

#include "compare.h"

int main(int argc, char **argv)
{
    double tol = 0;
    if (argc == 4) {
        char *end;
        tol = strtod(argv[3], &end);
        if (end == argv[3] || *end || !(tol >= 0)) {
            fprintf(stderr, "tensor_cmp: bad tolerance '%s'\n", argv[3]);
            return 2;
        }
    } else if (argc != 3) {
        fprintf(stderr, "Usage: tensor_cmp REFERENCE ANSWER [TOLERANCE]\n");
        return 2;
    }
    return sn_test_compare(argv[1], argv[2], tol, stdout);
}

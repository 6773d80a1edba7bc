#!/bin/sh
# Stands in for the test suite when configure did not find Criterion, so
# that `make check` fails instead of passing with no test run.
echo "Criterion was not found when configure ran: install it (Debian package" >&2
echo "libcriterion-dev, or run tools/install-deps), then re-run ./configure." >&2
exit 1

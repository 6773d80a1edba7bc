#!/bin/sh
# nvcc as libtool runs a C compiler: libtool adds gcc's -fPIC (and -DPIC)
# to the command it is given, which nvcc passes on to its host compiler
# only when written --compiler-options=-fPIC.  (libtool takes -Xcompiler
# for its own, so Makefile.am's flags use that long form too.)  Usage, as
# in Makefile.am's .cu.lo rule:
#   libtool --tag=CC --mode=compile sh nvcc-libtool.sh NVCC ARGS...
nvcc=$1
shift
for arg; do
    shift
    case $arg in
    -fPIC | -fpic) set -- "$@" --compiler-options="$arg" ;;
    *) set -- "$@" "$arg" ;;
    esac
done
exec "$nvcc" "$@"

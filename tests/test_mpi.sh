#!/bin/sh
# The MPI job: collectives between processes (tests/test_mpi.c) under
# mpirun -np 2 and -np 3 on this machine, each process with its own
# simulated devices (the environment of `make check`).
set -u
mpirun=${MPIRUN:-mpirun}
bin=$(dirname "${SHARDNET_BIN:-./shardnet}")/tests
fails=0
# Root (CI) needs Open MPI's consent; oversubscription: 3 processes on 2
# cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1

run_np() {
    np=$1
    shift
    timeout 300 "$mpirun" --oversubscribe -np "$np" "$@"
}

for np in 2 3; do
    echo "== mpirun -np $np tests/test_mpi"
    if ! run_np "$np" "$bin/test_mpi" "$np"; then
        echo "FAIL: mpirun -np $np tests/test_mpi"
        fails=$((fails + 1))
    fi
done
[ "$fails" -eq 0 ]

#!/usr/bin/env bash
# The whole test suite: the MPI tests under 2 and 3 ranks, then everything else.
# Exits non-zero if any run fails or collects no test (pytest's exit code 5).
set -u
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
status=0
run() {
    echo "+ $*"
    "$@"
    local code=$?
    if [ "$code" -ne 0 ]; then
        echo "FAILED (exit $code): $*"
        status=1
    fi
}
MPI_TESTS=$(ls tests/test_mpi_*.py 2>/dev/null)
if [ -n "$MPI_TESTS" ]; then
    for n in 2 3; do
        run timeout 900 mpiexec -n "$n" python tests/mpi_pytest.py -q --timeout=300 $MPI_TESTS
    done
fi
run python -m pytest -q --timeout=600 "$@"
exit $status

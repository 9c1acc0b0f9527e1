#!/usr/bin/env bash
# The whole test suite: everything that runs without MPI, then the MPI tests under 2
# and 3 ranks, then (without a GPU) the tests that exercise a device again on a simulated
# one. The run without MPI goes first so that it compiles the numba CPU kernels once
# into their disk cache (ddg/tensor/compiled.py); the MPI ranks then load them instead of
# each compiling the same kernels at once.
# Exits non-zero if any run fails or collects no test (pytest's exit code 5).
set -u
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
status=0
# Let Python cache byte code. Where PYTHONDONTWRITEBYTECODE is set (it is on the CI
# machines) no process writes .pyc files, so each of the suite's several hundred processes
# (pytest workers, MPI ranks, launchers) compiled ddg's modules from source again (0.3-0.6 s
# of CPU apiece), and pytest rewrote every test module's asserts again (~8 s per pytest
# process). compileall writes ddg's once before the processes that would race to.
unset PYTHONDONTWRITEBYTECODE
python -m compileall -q -j 0 ddg launch tests bench examples tools >/dev/null || true
run() {
    echo "+ $*"
    "$@"
    local code=$?
    if [ "$code" -ne 0 ]; then
        echo "FAILED (exit $code): $*"
        status=1
    fi
}
# two pytest workers (pytest-xdist), whole files to a worker: the machine's two cores
PARALLEL=""
if python -c "import xdist" 2>/dev/null; then PARALLEL="-n 2 --dist loadfile"; fi
# Two workers each starting 2- and 3-rank jobs oversubscribe the two cores, though each
# job alone would not: MPICH's waiting ranks sleep instead of spinning (the switch ddg
# sets by itself only where one job has more ranks than the node has CPUs,
# ddg/parallel/comm/launcher_env.py). It cut the CPU time of test_failfast.py and
# test_multinode.py by a third. The MPI runs below run one job at a time and keep the default.
WAIT=""
if [ -n "$PARALLEL" ]; then WAIT="MPIR_CVAR_ENABLE_HEAVY_YIELD=${MPIR_CVAR_ENABLE_HEAVY_YIELD:-1}"; fi
run env $WAIT python -m pytest -q --timeout=600 $PARALLEL "$@"
MPI_TESTS=$(ls tests/test_mpi_*.py 2>/dev/null)
if [ -n "$MPI_TESTS" ]; then
    for n in 2 3; do
        run timeout 900 mpiexec -n "$n" python tests/mpi_pytest.py -q --timeout=300 $MPI_TESTS
    done
fi
# Without a real GPU, run the GPU code paths once more on simcupy, the numpy-backed
# stand-in for cupy in tests/simgpu (see its docstring for what that does and does
# not prove). On a machine where cupy sees a GPU the runs above already used it.
if ! python -c "from ddg.tensor import backend; raise SystemExit(0 if backend.cupy_available() else 1)"; then
    export PYTHONPATH="$PWD/tests/simgpu${PYTHONPATH:+:$PYTHONPATH}"
    run python -c "import cupy; assert cupy.SIMULATED; print('simulated GPU: simcupy, cupy', cupy.__version__, 'API')"
    # only the tests that exercise a device (tests/conftest.py: touches_device); the rest
    # ran above on numpy and would run the same code again
    export DDG_DEVICE_TESTS_ONLY=1
    # 2 ranks sharing one simulated GPU, then 3 ranks with a GPU each
    run env SIMCUPY_DEVICES=1 timeout 900 mpiexec -n 2 python tests/mpi_pytest.py -q --timeout=300 $MPI_TESTS
    run env SIMCUPY_DEVICES=3 timeout 900 mpiexec -n 3 python tests/mpi_pytest.py -q --timeout=300 $MPI_TESTS
    run python -m pytest -q --timeout=600 "$@"
fi
exit $status

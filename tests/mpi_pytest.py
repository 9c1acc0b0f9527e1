"""Run pytest under mpiexec with only rank 0 printing (other ranks' output goes to a
log that is printed if that rank fails). Usage:

    mpiexec -n 2 python tests/mpi_pytest.py [pytest args...]
"""
import os
import sys
import tempfile

# the repository root, as `python -m pytest` from there would have it (ddg need not be installed)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _rank():
    from ddg.parallel.comm.launcher_env import launcher_rank
    rank = launcher_rank()
    return 0 if rank is None else rank


def main():
    import pytest
    rank = _rank()
    args = ["--with-mpi", "-p", "no:cacheprovider"] + sys.argv[1:]
    if rank == 0:
        code = pytest.main(args)
    else:
        log = tempfile.NamedTemporaryFile("w+", prefix=f"ddg-rank{rank}-", suffix=".log", delete=False)
        saved = os.dup(1), os.dup(2)
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            code = pytest.main(args + ["-q"])
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
        if code not in (0, 5):
            log.seek(0)
            sys.stdout.write(f"---- rank {rank} output ----\n" + log.read())
        os.unlink(log.name)
    sys.exit(int(code))


if __name__ == "__main__":
    main()

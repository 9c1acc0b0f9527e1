"""ddgrun: start N ranks of a ddg training script.

    ddgrun -n N [mpiexec options...] script.py [args...]
    ddgrun -n N [mpiexec options...] python [python options] script.py [args...]
    ddgrun -n N [mpiexec options...] -m package.module [args...]
    ddgrun --max_restarts K -n N ... : restart the job after a failure, up to K times

With ``-n 1`` the script simply runs in this Python, without MPI. Otherwise the job
is ``mpiexec -n N [options] <this python> rank_guard.py script.py args`` (the guard ends
the job when a rank fails before its first collective), where mpiexec is
``$DDG_MPIEXEC``, else the one installed next to this Python (the ``mpich`` wheel
of ``ddg[mpi]`` puts it there), else ``mpiexec``/``mpirun`` on PATH. Options between
``-n N`` and the program are passed to mpiexec unchanged (``--hostfile F``,
``-f F``, ``-hosts a,b``, ``-ppn 4``, ``-genv K V``...); end them with ``--`` when
an option ddgrun does not know takes a separate value. ``--dry-run`` prints the
command instead of running it.

Unless already set, OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and MKL_NUM_THREADS are
set to (cores) // (ranks on the node), at least 1, so that the ranks do not
oversubscribe the cores with BLAS threads: each rank's guard counts its own node's
cores and ranks (as the launcher tells it); without a guard, this machine's cores
and ``-ppn`` (else N) are used. When every host named (hostfile, ``-hosts``) is this
machine, all N ranks share its cores.

``--max_restarts K`` (or ``--max-restarts``) starts the whole job again when it fails,
up to K times, with a doubling pause; see launch/restarts.py.

The exit status is the job's (128 + signal number when a rank died of a signal); with
restarts, the last attempt's.
MPICH's hydra mpiexec reports a signaled rank by exiting with the bare signal number
(the raw wait status) and printing ``YOUR APPLICATION TERMINATED WITH THE EXIT STRING:
... (signal N)`` on its stdout, which ddgrun relays and reads to tell a rank killed by
signal N from one that called ``exit(N)``.
"""
import importlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading

USAGE = ("usage: ddgrun [--max_restarts K] -n N [mpiexec options...] "
         "(script.py | python script.py | -m module) [args...]")

# mpiexec options (MPICH/hydra, Intel MPI, Open MPI) that take one separate value.
_ONE_VALUE = {
    "-f", "-hostfile", "--hostfile", "-machinefile", "--machinefile", "-hosts", "-host", "--host",
    "-H", "-ppn", "-perhost", "--npernode", "-npernode", "-wdir", "--wdir", "-dir", "-bind-to",
    "--bind-to", "-map-by", "--map-by", "-launcher", "-launcher-exec", "-rmk", "-iface",
    "-configfile", "-x", "--mca-param-file", "-rankfile", "--rankfile", "-genvlist", "-envlist",
    "-profile", "-outfile-pattern", "-errfile-pattern", "--prefix", "-prefix", "-tag-output-pattern",
}
# ... and those taking two ("-genv NAME VALUE"; "-genv NAME=VALUE" takes one).
_TWO_VALUES = {"-genv", "-env", "--mca", "-mca", "-gmca"}
_PER_NODE = {"-ppn", "-perhost", "--npernode", "-npernode"}
_NPROC = {"-n", "-np", "--np", "--nproc", "--nprocs", "-c"}


class UsageError(Exception):
    pass


def _int_option(argv, i, what):
    """The integer value of the option at ``argv[i]`` (``--opt N`` or ``--opt=N``) and the
    index after it."""
    name, eq, value = argv[i].partition("=")
    if not eq:
        if i + 1 >= len(argv):
            raise UsageError(f"ddgrun: {name} needs a number of {what}")
        value = argv[i + 1]
        i += 1
    try:
        return int(value), i + 1
    except ValueError:
        raise UsageError(f"ddgrun: {name} needs a number of {what}, got {value!r}") from None


def parse_args(argv):
    """Split ddgrun's arguments into (nprocs, mpiexec_options, program, per_node, dry_run).

    ``program`` is the argv of one rank, starting with this Python unless the
    program is not a Python script.
    """
    return _parse(argv)[:5]


_RESTARTS = ("--max_restarts", "--max-restarts")


def _parse(argv):
    """:func:`parse_args`' tuple plus the number of restarts allowed."""
    nprocs, per_node, dry_run, max_restarts = 1, None, False, 0
    opts = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            raise UsageError(None)
        if a == "--dry-run":
            dry_run = True
            i += 1
            continue
        if a.partition("=")[0] in _RESTARTS:
            max_restarts, i = _int_option(argv, i, "restarts")
            if max_restarts < 0:
                raise UsageError(f"ddgrun: {a.partition('=')[0]} must be >= 0, got {max_restarts}")
            continue
        if a == "--":
            i += 1
            break
        if a == "-m":
            break
        if not a.startswith("-"):
            break
        name, eq, value = a.partition("=")
        if name in _NPROC:
            nprocs, i = _int_option(argv, i, "ranks")
            if nprocs < 1:
                raise UsageError(f"ddgrun: the number of ranks must be at least 1, got {nprocs}")
            continue
        # Any other option belongs to mpiexec, with the values it takes.
        take = 0
        if not eq:
            if name in _ONE_VALUE:
                take = 1
            elif name in _TWO_VALUES:
                take = 1 if (i + 1 < len(argv) and "=" in argv[i + 1]) else 2
        if i + take >= len(argv):
            raise UsageError(f"ddgrun: option {a} needs {take} value(s)")
        opts.extend(argv[i:i + 1 + take])
        if name in _PER_NODE:
            try:
                per_node = int(value if eq else argv[i + 1])
            except ValueError:
                pass
        i += 1 + take
    rest = argv[i:]
    if not rest:
        raise UsageError("ddgrun: no program given")
    return nprocs, opts, _program(rest), per_node, dry_run, max_restarts


def _is_python(token):
    base = os.path.basename(token)
    if not base.startswith("python"):
        return False
    suffix = base[len("python"):]
    return suffix == "" or all(c.isdigit() or c == "." for c in suffix)


def _program(rest):
    """The per-rank command line: this interpreter for Python programs."""
    first = rest[0]
    if first == "-m":
        if len(rest) < 2:
            raise UsageError("ddgrun: -m needs a module name")
        return [sys.executable] + rest
    if _is_python(first):
        if len(rest) < 2:
            raise UsageError("ddgrun: python needs a script or -m module")
        return [sys.executable] + rest[1:]
    if first.endswith(".py") or not (os.path.isfile(first) and os.access(first, os.X_OK)):
        if first.endswith(".py") and not os.path.exists(first):
            raise UsageError(f"ddgrun: no such script: {first}")
        return [sys.executable] + rest
    return list(rest)  # some other executable (a shell script, hostname, ...)


def find_mpiexec():
    """The mpiexec to use, or raise FileNotFoundError with a clear message."""
    forced = os.environ.get("DDG_MPIEXEC")
    if forced:
        path = forced if os.sep in forced else shutil.which(forced)
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
        raise FileNotFoundError(f"ddgrun: DDG_MPIEXEC={forced} is not an executable mpiexec; "
                                f"install ddg[mpi] (pip install 'ddg[mpi]') or point DDG_MPIEXEC at one")
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.path.isfile(here) and os.access(here, os.X_OK):
        return here
    for name in ("mpiexec", "mpirun"):
        path = shutil.which(name)
        if path:
            return path
    raise FileNotFoundError("ddgrun: no mpiexec found (not in DDG_MPIEXEC, next to "
                            f"{sys.executable}, or on PATH); install ddg[mpi] (pip install 'ddg[mpi]')")


def _cores():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def thread_env(ranks_per_node, environ=None, per_node_guard=True):
    """A copy of the environment with BLAS/OpenMP thread counts set (when unset), and
    (``per_node_guard``) ``DDG_AUTO_THREADS`` naming those set here: each rank's guard
    (rank_guard.py) sets them again from its own node's cores and rank count, which only
    it knows."""
    env = dict(os.environ if environ is None else environ)
    threads = str(max(1, _cores() // max(1, ranks_per_node)))
    auto = [var for var in THREAD_VARS if var not in env]
    for var in auto:
        env[var] = threads
    if auto and per_node_guard:
        env["DDG_AUTO_THREADS"] = ",".join(auto)
    return env


_HOSTFILE_OPTS = {"-f", "-hostfile", "--hostfile", "-machinefile", "--machinefile"}
_HOSTS_OPTS = {"-hosts", "-host", "--host", "-H"}


def _sibling(name):
    """A module beside this file: ``launch.<name>`` (or ``ddg_launch.<name>`` installed), or
    the plain file when this one runs as ``python launch/ddgrun.py``."""
    if __package__:
        return importlib.import_module(f"{__package__}.{name}")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    return importlib.import_module(name)


def sleeping_wait(env, nprocs, opts):
    """MPICH's sleeping wait for waiting ranks (``launcher_env.idle_wait_env``, ``1`` unless
    ``env`` sets it) when every one of the ``nprocs`` ranks runs on this machine (no host
    named, or only this one) and they outnumber its cores; returns ``env``. Each rank makes
    the same choice before ``MPI_Init`` from its launcher's count of ranks on its node;
    ddgrun knows better where simulated nodes share this machine's cores, and a program that
    imports mpi4py before ddg has started MPI before ddg could choose."""
    names_hosts = any(o.partition("=")[0] in _HOSTFILE_OPTS | _HOSTS_OPTS for o in opts)
    launcher_env = _sibling("rank_guard")._ENV      # ddg's launcher-variable module, by file path
    if launcher_env is not None and (not names_hosts or hosts_all_here(opts)):
        env.update(launcher_env.idle_wait_env(env, cpus=_cores(), ranks=nprocs))
    return env


def hosts_all_here(opts):
    """True when the hosts named in mpiexec's options (a hostfile, ``-hosts``) are all this
    machine (``localhost:2`` and ``127.0.0.1:2`` simulate two nodes on one): every rank
    then shares this machine's cores, whatever "node" the launcher puts it on. False when
    one is another machine, or none is named, or a hostfile cannot be read."""
    names = []
    for i, opt in enumerate(opts):
        name, eq, value = opt.partition("=")
        if name not in _HOSTFILE_OPTS | _HOSTS_OPTS:
            continue
        value = value if eq else (opts[i + 1] if i + 1 < len(opts) else "")
        if name in _HOSTS_OPTS:
            names += value.split(",")
            continue
        try:
            with open(value) as f:
                names += [line.split("#")[0].split()[0] for line in f if line.split("#")[0].strip()]
        except OSError:
            return False
    hosts = {n.rsplit(":", 1)[0] if n.count(":") == 1 else n for n in names if n}
    return bool(hosts) and all(_is_this_machine(h) for h in hosts)


def _is_this_machine(host):
    import socket
    if host in ("localhost", "::1") or host.startswith("127."):
        return True
    try:
        here = {socket.gethostname(), socket.getfqdn()}
        return host in here or socket.gethostbyname(host).startswith("127.") or \
            socket.gethostbyname(host) in {socket.gethostbyname(h) for h in here}
    except OSError:
        return False


def build_command(nprocs, opts, program):
    if nprocs == 1 and not opts:
        # no MPI; the guard only to write the output to DDG_LOG_DIR (ddg.distributed.launch --log_dir)
        return guarded(program) if os.environ.get("DDG_LOG_DIR") else list(program)
    return [find_mpiexec(), "-n", str(nprocs)] + list(opts) + guarded(program)


RANK_GUARD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rank_guard.py")
_PY_OPTS_WITH_VALUE = ("-W", "-X", "--check-hash-based-pycs")


def guarded(program):
    """``program`` run through rank_guard.py when it is this Python running a script or
    a module: a rank that fails before the job's first collective then ends the job
    instead of leaving the others waiting (see rank_guard.py). Other programs (``-c``,
    executables) are left as they are."""
    if not program or program[0] != sys.executable:
        return list(program)
    i = 1
    while i < len(program) and program[i].startswith("-") and program[i] != "-m":
        if program[i] in ("-c", "-", "--"):
            return list(program)
        i += 2 if program[i] in _PY_OPTS_WITH_VALUE else 1
    if i >= len(program):
        return list(program)
    return program[:i] + [RANK_GUARD] + program[i:]


# Hydra's report of a rank that died of a signal (mpiexec.c prints it on stdout).
_HYDRA_SIGNALED = re.compile(rb"TERMINATED WITH THE EXIT STRING: [^\n]*\(signal (\d+)\)")
_TAIL = 4096  # bytes of mpiexec's output kept to look for that report
# rank_guard.py's report of a rank that failed before the job's first collective
_RANK_FAILED = re.compile(rb"\[ddgrun\] rank \S+ failed before the job's first collective \(exit status (\d+)\)")


def _relay(src, dst, tail, on_rank_failed=None):
    """Copy mpiexec's stdout to ours as it comes, keeping its last bytes in ``tail``;
    ``on_rank_failed(status)`` is called once when a rank guard reports a failure."""
    reported = False
    while True:
        try:
            data = os.read(src, 1 << 16)
        except OSError:
            data = b""
        if not data:
            break
        try:
            dst.write(data)
            dst.flush()
        except (OSError, ValueError):
            pass
        seen = tail[0] + data
        tail[0] = seen[-_TAIL:]
        if on_rank_failed is not None and not reported:
            found = _RANK_FAILED.search(seen)
            if found:
                reported = True
                on_rank_failed(int(found.group(1)))


def _run(cmd, env, mpi=False, stopped=None):
    """Run the job and return its exit status, 128 + N when a rank died of signal N.
    The signals ddgrun passed on to the job are appended to ``stopped``."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE if mpi else None)
    tail = [b""]
    failed = []
    relay = None

    def end_job(status):
        # A rank failed before MPI connected it: mpiexec would wait for it (and the other
        # ranks for its collectives) forever. Stop the job; its status is that rank's.
        failed.append(status)
        try:
            proc.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            pass

    if mpi:
        out = getattr(sys.stdout, "buffer", None) or sys.stdout
        relay = threading.Thread(target=_relay, args=(proc.stdout.fileno(), out, tail, end_job), daemon=True)
        relay.start()

    # Pass SIGTERM/SIGINT on to the child (mpiexec then stops every rank) and keep
    # waiting for it, so that our exit status is the job's.
    def forward(signum, frame):
        if stopped is not None:
            stopped.append(signum)
        try:
            proc.send_signal(signum)
        except ProcessLookupError:
            pass

    old = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        rc = proc.wait()
        if relay is not None:
            relay.join()
            proc.stdout.close()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if failed:
        return failed[0]
    return job_status(rc, tail[0])


def job_status(rc, mpiexec_output=b""):
    """Our exit status from the child's return code (negative: killed by a signal) and,
    for an MPI job, the end of mpiexec's output (hydra exits with the bare signal number
    of a signaled rank, so only its report tells that apart from an exit status)."""
    if rc < 0:
        return 128 - rc
    if rc > 0:
        found = _HYDRA_SIGNALED.findall(mpiexec_output)
        if found and (rc & 0x7F) == int(found[-1]):
            return 128 + int(found[-1])
    return rc


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        nprocs, opts, program, per_node, dry_run, max_restarts = _parse(argv)
        cmd = build_command(nprocs, opts, program)
    except UsageError as e:
        print(e.args[0] if e.args[0] else __doc__.strip() + "\n\n" + USAGE,
              file=sys.stderr if e.args[0] else sys.stdout)
        if e.args[0]:
            print(USAGE, file=sys.stderr)
        return 2 if e.args[0] else 0
    except FileNotFoundError as e:
        print(str(e), file=sys.stderr)
        return 2
    # simulated nodes on this one machine share its cores: count every rank
    here = hosts_all_here(opts)
    env = sleeping_wait(thread_env(nprocs if here else (per_node or nprocs), per_node_guard=not here),
                        nprocs, opts)
    if dry_run:
        print(shlex.join(cmd))
        return 0
    mpi = not (nprocs == 1 and not opts)
    if max_restarts:
        restarts = _sibling("restarts")
        try:
            pause = restarts.restart_pause()
        except ValueError as e:
            print(f"ddgrun: {e}", file=sys.stderr)
            return 2
    try:
        if max_restarts == 0:
            return _run(cmd, env, mpi=mpi)
        return restarts.run_with_restarts(lambda e, stopped: _run(cmd, e, mpi=mpi, stopped=stopped),
                                          max_restarts, env, pause=pause)
    except OSError as e:
        print(f"ddgrun: cannot start {cmd[0]}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

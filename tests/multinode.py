"""Two "nodes" on one machine, for the multi-node tests.

A hostfile that names this machine twice, once as ``localhost`` and once as ``127.0.0.1``,
makes MPICH's hydra treat them as two hosts: it starts one proxy per host, each rank
learns the node it is on from its proxy (``MPI_LOCALRANKID``/``MPI_LOCALNRANKS``, and MPI's
node-local communicators from ``COMM_TYPE_SHARED``), and ranks on different "nodes" talk
over the network transport (UCX) instead of shared memory, as they would on a cluster.
Both hosts are this machine, so no ssh is needed: hydra starts local hosts itself.
"""
import os

HOSTS = ("localhost", "127.0.0.1")


def hostfile(directory, slots=2):
    """Write ``hosts.txt`` (two hosts with ``slots`` each) into ``directory``; return its path."""
    path = os.path.join(str(directory), "hosts.txt")
    with open(path, "w") as f:
        f.write("".join(f"{host}:{slots}\n" for host in HOSTS))
    return path


def hostfile_args(directory, per_node):
    """mpiexec/ddgrun options that place ``per_node`` ranks on each simulated node in turn."""
    return ["-f", hostfile(directory, per_node), "-ppn", str(per_node)]

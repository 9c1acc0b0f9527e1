#!/bin/bash
# Example: 2 nodes x 4 ranks (one per GPU). Submit with: qsub launch/pbs.sh
#PBS -N ddg-train
#PBS -l select=2:ncpus=32:ngpus=4:mpiprocs=4
#PBS -l walltime=01:00:00
#PBS -j oe

set -euo pipefail
cd "$PBS_O_WORKDIR"
source ~/venvs/ddg/bin/activate         # the environment with ddg[mpi] (and ddg[gpu])

# $PBS_NODEFILE lists each node once per MPI process (mpiprocs=4).
NRANKS=$(wc -l < "$PBS_NODEFILE")
export DDG_STALL_TIMEOUT=300

ddgrun -n "$NRANKS" -f "$PBS_NODEFILE" train.py --epochs 10

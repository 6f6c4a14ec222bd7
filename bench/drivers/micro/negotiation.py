"""Horovod 0.9-0.13's control plane, one cycle, timed on rank 0: every rank sends one MPI message per
ready tensor to rank 0, then an empty DONE; rank 0 probes and receives them one at a time (from any
source), then sends each fused response to every other rank, then DONE (horovod/tensorflow/mpi_ops.cc
at v0.10.0; replaced by MPI_Gather and MPI_Bcast in horovod/horovod#276, 2018-06-02). What rank 0
spends per message bounds what this negotiation adds to a step at N ranks and T tensors.

    mpirun -np 8 --mca btl tcp,self python -m bench.drivers.micro.negotiation 300
"""

from __future__ import annotations

import statistics
import sys
import time

REQUEST = b"x" * 60  # a serialized MPIRequest: the tensor's name, type and shape
FUSED = 10  # tensors per fused response
CYCLES = 20


def cycle(comm, tensors: int) -> None:
    from mpi4py import MPI

    rank, size = comm.Get_rank(), comm.Get_size()
    buffer = bytearray(len(REQUEST))
    if rank:
        for _ in range(tensors):
            comm.Send([REQUEST, MPI.BYTE], dest=0, tag=1)
        comm.Send([b"", MPI.BYTE], dest=0, tag=1)
        while True:
            status = MPI.Status()
            comm.Probe(source=0, tag=1, status=status)
            comm.Recv([buffer, MPI.BYTE], source=0, tag=1)
            if status.Get_count(MPI.BYTE) == 0:
                return
    done = 1
    while done != size:
        status = MPI.Status()
        comm.Probe(source=MPI.ANY_SOURCE, tag=1, status=status)
        comm.Recv([buffer, MPI.BYTE], source=status.Get_source(), tag=1)
        done += status.Get_count(MPI.BYTE) == 0
    for _ in range(tensors // FUSED):
        for r in range(1, size):
            comm.Send([REQUEST, MPI.BYTE], dest=r, tag=1)
    for r in range(1, size):
        comm.Send([b"", MPI.BYTE], dest=r, tag=1)


def main() -> None:
    from mpi4py import MPI

    comm, tensors = MPI.COMM_WORLD, int(sys.argv[1])
    times = []
    for _ in range(CYCLES):
        comm.Barrier()
        began = time.perf_counter()
        cycle(comm, tensors)
        comm.Barrier()
        times.append(time.perf_counter() - began)
    if comm.Get_rank() == 0:
        size = comm.Get_size()
        messages = (size - 1) * (tensors + 1) + (size - 1) * (tensors // FUSED + 1)
        median = statistics.median(times)
        print(f"ranks {size}, tensors {tensors}: a cycle {median * 1e3:.2f} ms (median of {CYCLES}), "
              f"{median / messages * 1e6:.2f} us per message at rank 0")


if __name__ == "__main__":
    main()

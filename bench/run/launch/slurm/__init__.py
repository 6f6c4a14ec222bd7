"""Runs under Slurm: the allocation, its nodes and `srun` steps (srun), and Horovod's Gloo
rendezvous for the ranks of one srun step (gloo). The emulated cluster's own Slurm daemons are
infrastructure (bench.infra.emulated.slurm)."""

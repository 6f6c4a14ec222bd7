"""Infrastructure under the runs: this machine's programs and ports (tools), and the emulated
cluster (hosts in network namespaces with capped links, and their Slurm daemons)."""

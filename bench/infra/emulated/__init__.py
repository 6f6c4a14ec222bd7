"""The emulated cluster: hosts in network namespaces with capped links (network), its Slurm
daemons (slurm), the check of its links (linkcheck) and its command line. A run placed on it is
the launcher's (bench.run.launch.emulated_hosts)."""

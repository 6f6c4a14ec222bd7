"""The projection: one per-tensor model of each exchange scheme's step on a cluster of hosts
(schemes, allreduce, parameter_servers), fed by transport profiles (profile) and calibrated
from runs (calibrate, from_runs) or from a described cluster (cluster_cli)."""

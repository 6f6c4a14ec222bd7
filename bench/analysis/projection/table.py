"""Every exchange scheme on one cluster, one row each, with its interval: what `python -m bench project`
prints, for a described cluster and for one calibrated from runs alike."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from bench.analysis.projection import levels
from bench.analysis.projection.cluster import Cluster
from bench.analysis.projection.intervals import Interval, evaluator, interval, interval_columns
from bench.analysis.projection.profile import Profile
from bench.analysis.projection.schemes import ModelErrors, PsSetup, combinations, form_of
from bench.run.contract import GRPC
from bench.run.models.tensors import ModelTensors


@dataclass(frozen=True)
class Figure:
    """One scheme's row, its interval, and its examples/s at the point of another profile (a constant moved)."""

    row: dict
    found: Interval
    again: Callable[[Profile], float]


def rows(model: str, tensors: ModelTensors, cluster: Cluster, ps: PsSetup, profile: Profile,
         intra_host_from_profile: bool = True, compute: levels.Term | None = None,
         other_of: Callable[[str, str], float] | None = None, level: float = levels.DEFAULT_LEVEL,
         model_error: ModelErrors | None = None) -> list[dict]:
    return [f.row for f in figures(model, tensors, cluster, ps, profile, intra_host_from_profile, compute,
                                   other_of, level, model_error)]


def figures(model: str, tensors: ModelTensors, cluster: Cluster, ps: PsSetup, profile: Profile,
            intra_host_from_profile: bool = True, compute: levels.Term | None = None,
            other_of: Callable[[str, str], float] | None = None, level: float = levels.DEFAULT_LEVEL,
            model_error: ModelErrors | None = None) -> list[Figure]:
    """`other_of(scheme, transport)`: the host's own per-step work of that scheme (Cluster.other_s), where
    known. `model_error`: the model's error of each form, where it was calibrated."""
    out = []
    alone = cluster.device_examples_per_s
    for scheme, transport in combinations(cluster, profile, tensors):
        here = dataclasses.replace(cluster, other_s=other_of(scheme, transport)) if other_of else cluster
        found = interval(scheme, transport, tensors, here, ps, profile, intra_host_from_profile, compute, level=level)
        if model_error and form_of(scheme) in model_error:
            found = found.with_model(model_error[form_of(scheme)])
        terms = found.terms
        uses_ps = transport == GRPC
        at = evaluator(scheme, transport, tensors, here, ps, intra_host_from_profile)
        out.append(Figure({"model": model, "workers": cluster.workers, "devices_per_host": cluster.devices_per_host,
                    "hosts": cluster.hosts, "link_gbit": cluster.link_gbit, "batch_size": cluster.batch_size,
                    "scheme": scheme, "transport": transport, "ps": ps.tasks if uses_ps else 0,
                    "ps_colocated": ps.colocated if uses_ps else None,
                    "ps_placement": ps.placement if uses_ps else None,
                    **interval_columns(found, "throughput"), "step_s": found.step_s,
                    "step_s_low": found.step_bounds()[0], "step_s_high": found.step_bounds()[1],
                    "compute_s": terms.compute_s,
                    "exposed_communication_s": terms.exposed_communication_s, "waiting_s": terms.waiting_s,
                    "other_s": terms.other_s,
                    "scaling_efficiency": found.point / (cluster.workers * alone)},
                          found, lambda point, at=at: at(point)[0]))
    return out

"""`upgrade`, the one place where run.json records written by older versions of the schema
(bench.run.process.schema) are brought to the current shape, as the report reads them: the
strategy's facts a record did not hold are what the registered strategy of that name declares."""

from __future__ import annotations

from typing import Any

from bench.run.process.schema import PURPOSES, SCHEMA_VERSION, purpose_of, scenario_of


def upgrade(record: dict[str, Any]) -> dict[str, Any]:
    """The record in the current shape, whatever version wrote it (the file is not rewritten)."""
    version = record.get("schema_version", 1)
    if version >= SCHEMA_VERSION:
        return record
    out = dict(record)
    config = out.get("config") or {}
    name = config.get("run_name") or ""
    # presets of version 1 named their runs "throughput-..." / "convergence-..."
    out["purpose"] = name.split("-", 1)[0] if name.startswith(tuple(f"{p}-" for p in PURPOSES)) \
        else purpose_of(config)
    out["scenario"] = scenario_of(config)
    if not isinstance(out.get("strategy"), dict):
        out["strategy"] = _declared(config)
    else:  # facts declared since the record was written
        out["strategy"] = {**_declared(config), **out["strategy"]}
    summary = dict(out.get("summary") or {})
    if summary.get("startup_s") is None and out.get("startup_s") is not None:
        summary["startup_s"] = out["startup_s"]
    out["summary"] = summary
    if "exchange" not in out:
        info = out.get("strategy_info") or {}
        sent = info.get("bytes_sent_per_rank_per_step", info.get("bytes_sent_per_worker_per_step"))
        out["exchange"] = {"worker_sent_per_step": sent} if sent is not None else {}
    out["schema_version"] = SCHEMA_VERSION
    return out


def _declared(config: dict[str, Any]) -> dict[str, Any]:
    """What the registered strategy of that name declares, for a record that did not say."""
    from bench.config import RunConfig
    from bench.errors import UsageError
    from strategies import registry

    try:
        strategy = registry.get(config.get("strategy", ""))
        return strategy.facts(strategy.with_defaults(RunConfig.from_dict(config)))
    except (UsageError, TypeError, KeyError, ValueError):
        return {"name": config.get("strategy"), "variant": config.get("strategy")}

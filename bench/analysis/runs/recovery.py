"""A run's recoveries (--recover) as its row's columns: summed over its restarts (bench.metrics defines downtime,
steps lost and time lost)."""

from __future__ import annotations

from typing import Any

# summary.csv's columns of a run's recoveries (recovery_columns)
RECOVERY_COLUMNS = ["recover", "recoveries", "recovered_by", "recovery_downtime_s", "recovery_steps_lost",
                    "recovery_time_lost_s"]


def recovery_columns(summary: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """A run's recoveries, summed (per recovery they are in its run.json's summary)."""
    done = summary.get("recoveries") or []

    def total(key: str) -> float | None:
        values = [r[key] for r in done if r.get(key) is not None]
        return sum(values) if values else None

    return {"recover": bool(config.get("recover")), "recoveries": len(done),
            "recovered_by": ", ".join(sorted({r["how"] for r in done})) or None,
            "recovery_downtime_s": total("downtime_s"), "recovery_steps_lost": total("steps_lost"),
            "recovery_time_lost_s": total("time_lost_s")}

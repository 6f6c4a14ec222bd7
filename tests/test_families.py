"""The family answer (bench.analysis.report.families): parameter servers against allreduce per cell, measured by
the rerun rule and projected by the projection's intervals; families.csv; a figure too wide to rank."""

import math

import pandas as pd
import pytest

from bench.analysis.report import answer, families, verdict
from tests.test_answer import answered, frame, matrix, run

NO_TENSORFLOW = True


def test_each_familys_fastest_and_the_verdict_between_ps_and_allreduce_by_the_rerun_rule():
    runs = matrix(models=("mlp",))
    found = families.measured(verdict.Verdicts.of(runs))
    assert list(found.columns[:10]) == ["source", "model", "workers", "link_gbit", "parameter_servers", "allreduce",
                                        "ratio", "low", "high", "verdict"]
    row = found.set_index("workers").loc[4]
    assert (row["in_graph"], row["parameter_servers"], row["allreduce"], row["parameter_averaging"]) == (
        "multi-tower", "ps-sync", "allreduce", "local-sgd")
    assert row["ratio"] == pytest.approx(2.0) and row["verdict"] == families.ALLREDUCE_AHEAD
    assert row["low"] == pytest.approx(2.0 / row["needs"]) and row["high"] == pytest.approx(2.0 * row["needs"])
    # the better of each family counts: a faster ps strategy beside a slow one moves the ratio
    faster = frame([*runs.to_dict("records"), run("ps-async", 1900.0, 4, "mlp", "parameter-server")])
    close = families.measured(verdict.Verdicts.of(faster)).set_index("workers").loc[4]
    assert close["parameter_servers"] == "ps-async" and close["ratio"] == pytest.approx(2000 / 1900)
    assert close["verdict"] == families.TIE  # 5 % apart: within what a rerun moves it
    # a cell where one family did not run has no family verdict
    no_allreduce = frame([r for r in runs.to_dict("records") if r["family"] != "allreduce"])
    assert families.measured(verdict.Verdicts.of(no_allreduce)).empty


def test_a_figure_too_wide_is_never_ranked_called_best_or_said_to_scale():
    runs = matrix(models=("mlp",))
    rows = runs.to_dict("records")
    for row in rows:  # allreduce x4 measured at ± 60 %: the fastest figure of its family, and of its cell's families
        if row["strategy"] == "allreduce" and row["workers"] == 4:
            row["throughput_examples_per_s"], row["throughput_ci95_examples_per_s"] = 9000.0, 5400.0
    wide = frame(rows)
    assert verdict.unranked(verdict.Verdicts.of(wide)) == ["mlp allreduce x4 ± 60 %"]
    cells = verdict.answer(verdict.Verdicts.of(wide)).set_index("workers")
    assert "allreduce" not in (cells.loc[4, "fastest"], cells.loc[4, "runner_up"])
    # no allreduce figure left at 4 workers
    assert 4 not in families.measured(verdict.Verdicts.of(wide))["workers"].tolist()
    lines = answer.lines(*answered(wide))
    said = "\n".join(lines)
    assert "Not ranked (95 % interval beyond ±25%): mlp allreduce x4 ± 60 %." in said
    assert not any("allreduce" in line and "from 2 to 4" in line for line in lines)


def projection_rows(ring: tuple[float, float, float], ps: tuple[float, float, float], workers: int = 16,
                    link: float = 10.0) -> list[dict]:
    def row(scheme: str, transport: str, figures: tuple[float, float, float], widest: str, u: float) -> dict:
        point, low, high = figures
        return {"model": "mlp", "workers": workers, "link_gbit": link, "scheme": scheme, "transport": transport,
                "ps": 4 if transport == "grpc" else 0, "throughput_examples_per_s": point, "throughput_low": low,
                "throughput_high": high, "widest_term": widest, "widest_term_u_log": u}

    return [row("allreduce (ring)", "mpi", ring, "latency_s", 0.4),
            row("allreduce (ring)", "gloo", tuple(0.5 * x for x in ring), "latency_s", 0.4),
            row("ps, synchronous", "grpc", ps, "grpc.cores_gain (extrapolated)", 0.6)]


def test_an_older_projections_answer_names_a_family_only_where_the_two_intervals_do_not_overlap():
    apart = families.projected(None, projection_rows((3000, 2500, 3600), (1000, 800, 1200))).iloc[0]
    assert apart["verdict"] == families.ALLREDUCE_AHEAD and apart["ratio"] == pytest.approx(3.0)
    assert (apart["low"], apart["high"]) == (pytest.approx(2500 / 1200), pytest.approx(3600 / 800))
    assert apart["allreduce"] == "allreduce (ring) over mpi" and apart["parameter_servers"].endswith("4 ps")
    assert apart["widest_term"] == "grpc.cores_gain (extrapolated)" and math.isnan(apart["needs"])
    overlap = families.projected(None, projection_rows((1100, 800, 1500), (1000, 700, 1400))).iloc[0]
    assert overlap["verdict"] == families.TIE and overlap["low"] < 1 < overlap["high"]
    ps_ahead = families.projected(None, projection_rows((500, 400, 600), (1000, 900, 1100))).iloc[0]
    assert ps_ahead["verdict"] == families.PS_AHEAD
    lines = answer.projected_lines(families.projected(None, projection_rows((1100, 800, 1500), (1000, 700, 1400))),
                                   {"name": "loopback-2026"})
    assert "profile loopback-2026" in lines[0] and lines[2].endswith("overlap 1.1x [0.571-2.14]")
    assert all(len(line) <= answer.ANSWER_WIDTH for line in lines)


def cell(low: float, high: float, **more) -> dict:
    return {"model": "mlp", "workers": 128, "link_gbit": 10.0, "allreduce": "allreduce (ring) over mpi",
            "parameter_servers": "ps, synchronous over grpc, 32 ps", "ratio": (low * high) ** 0.5, "low": low,
            "high": high, "level": 0.9, "turns_on": "", "break_even": math.nan, "ahead_below": "",
            "widest_term": "latency_s", **more}


def test_a_projected_cell_that_holds_1_says_the_constant_it_turns_on_and_its_break_even():
    cells = [cell(1.5, 3.0), cell(0.5, 2.0, turns_on="mpi.compute_stretch", break_even=0.915,
                                  ahead_below="allreduce", workers=16)]
    table = families.projected(cells)
    assert list(table["verdict"]) == [families.ALLREDUCE_AHEAD, families.TIE]
    lines = answer.projected_lines(table, {"name": "measured",
                                           "constants": [{"name": "mpi.compute_stretch", "unit": "x"}]})
    # the longest cell still ends before the next begins
    assert lines[2].split()[2:] == ["ar", "while", "mpi.compute_stretch", "<", "0.915", "x", "allreduce", "2.12x",
                                    "[1.5-3]"]
    assert all(len(line) <= answer.ANSWER_WIDTH for line in lines)


def test_families_csv_holds_both_sources_one_row_a_cell(tmp_path):
    runs = matrix()
    folded = verdict.Verdicts.of(runs)
    found = families.both(folded, {"projection": projection_rows((3000, 2500, 3600), (1000, 800, 1200))})
    families.write(found, tmp_path)
    table = pd.read_csv(tmp_path / families.FAMILIES_FILE)
    assert list(table.columns) == families.COLUMNS
    assert table["source"].value_counts().to_dict() == {"measured": 6, "projected": 1}
    assert table.loc[table["source"] == "measured", "link_gbit"].isna().all()
    assert set(table["verdict"]) <= {families.ALLREDUCE_AHEAD, families.PS_AHEAD, families.TIE}
    lines = answer.lines(folded, verdict.answer(folded), found, {"name": "loopback-2026"})
    assert len(lines) <= answer.ANSWER_LINES - 1 and all(len(line) <= answer.ANSWER_WIDTH for line in lines)
    assert any(line.startswith("Projected to hosts like this one") for line in lines)


def test_two_family_answers_are_set_side_by_side():
    from bench.analysis.report.agreement import agreement_section, family_agreement

    baseline_runs = matrix(models=("mlp",))
    baseline = verdict.Verdicts.of(baseline_runs)
    allreduce_slowed = verdict.Verdicts.of(frame([
        {**r, "throughput_examples_per_s": r["throughput_examples_per_s"] * (0.3 if r["family"] == "allreduce"
                                                                              else 1.0)}
        for r in baseline_runs.to_dict("records")]))
    both = family_agreement(allreduce_slowed, baseline).set_index("workers")
    assert (both.loc[4, "verdict"], both.loc[4, "verdict_baseline"]) == (families.PS_AHEAD, families.ALLREDUCE_AHEAD)
    assert both.loc[4, "agreement"] == "reversed"
    assert family_agreement(baseline, baseline)["agreement"].eq("same").all()
    assert 'id="agreement-families"' in agreement_section(allreduce_slowed, baseline)


def test_a_run_measured_again_stands_for_its_setting_and_the_first_is_kept_but_not_ranked():
    runs = matrix(models=("mlp",))
    rows = runs.to_dict("records")
    first = {**run("allreduce", 9000.0, 4, "mlp", "allreduce", window=0.6), "superseded": "measured again"}
    with_superseded = frame([*rows, first])
    assert len(with_superseded) == len(runs) + 1  # the first run is still a row of the runs
    folded = verdict.Verdicts.of(with_superseded)
    cell = families.measured(folded).set_index("workers").loc[4]
    assert cell["ratio"] == pytest.approx(2.0) and cell["rounds"] == 1  # the superseded run takes no part
    assert verdict.unranked(folded) == []

"""The comparison's answer on time to accuracy (bench.analysis.report.convergence_answer): each strategy's time
and steps to the target over its seeds or its best where it never got there, and a family verdict that claims
no lead its seeds cannot carry; the terminal's block, convergence.csv, and the report opening on the answer."""

import math

import pandas as pd
import pytest

from bench.analysis.report import answer, convergence_answer, convergence_settings, verdict
from bench.metrics import t975
from tests.test_answer import answered, matrix

NO_TENSORFLOW = True
FAMILY = {"multi-tower": "in-graph", "ps-sync": "parameter-server", "ps-async": "parameter-server",
          "allreduce": "allreduce", "local-sgd": "parameter-averaging"}


def converged(strategy: str, seconds: list[float | None], best: float = 0.86, workers: int = 4) -> list[dict]:
    """A convergence run per seed: its time to target (None: never reached)."""
    return [{"ok": True, "purpose": "convergence", "scenario": "clean", "strategy": strategy, "variant": strategy,
             "family": FAMILY[strategy], "model": "mlp", "data": "teacher", "workers": workers, "link_mbit": math.nan,
             "seed": seed, "time_to_target_s": math.nan if s is None else s,
             "steps_to_target": math.nan if s is None else 100 * round(s), "best_accuracy": best if s else 0.37,
             "target_accuracy": 0.82, "asynchronous": strategy == "ps-async"} for seed, s in enumerate(seconds)]


def frame(*groups: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([row for group in groups for row in group])


def test_a_strategy_reports_its_time_over_the_seeds_that_reached_the_target_or_its_best():
    table = convergence_settings.strategies(frame(converged("allreduce", [2.0, 8.0]),
                                                  converged("ps-async", [None, None]),
                                                  converged("ps-sync", [3.0, None])))
    rows = table.set_index("variant")
    assert rows.loc["allreduce", "time_to_target_s"] == pytest.approx(4.0)  # geometric mean of 2 and 8
    assert rows.loc["allreduce", "log_sd"] == pytest.approx(math.log(4) / math.sqrt(2))
    assert (rows.loc["ps-async", "status"], rows.loc["ps-sync", "status"]) == ("not reached", "some seeds")
    assert convergence_answer.said(rows.loc["ps-async"].rename("ps-async")) == "not reached, best 0.370"
    assert convergence_answer.said(rows.loc["ps-sync"]).startswith("1 of 2 seeds reached")


def test_a_lead_counts_only_beyond_the_seed_spread_and_one_seed_decides_nothing():
    spread = [converged("multi-tower", [1.0, 1.2]), converged("local-sgd", [1.1, 1.0])]
    clear = convergence_answer.verdict(convergence_settings.strategies(
        frame(converged("allreduce", [2.0, 2.2]), converged("ps-sync", [7.0, 7.5]), *spread)))
    sd, dof = convergence_answer.pooled_spread(convergence_settings.strategies(
        frame(converged("allreduce", [2.0, 2.2]), converged("ps-sync", [7.0, 7.5]), *spread)))
    assert dof == 4
    assert clear["verdict"] == "allreduce" and clear["lead"] == pytest.approx(math.sqrt(7 * 7.5 / (2 * 2.2)))
    assert clear["needs"] == pytest.approx(math.exp(t975(4) * sd))  # sqrt(1/2 + 1/2) = 1
    close = convergence_answer.verdict(convergence_settings.strategies(
        frame(converged("allreduce", [2.0, 3.0]), converged("ps-sync", [2.6, 2.4]), *spread)))
    assert close["verdict"] == "tie" and close["lead"] < close["needs"]
    one = convergence_answer.verdict(convergence_settings.strategies(
        frame(converged("allreduce", [2.0]), converged("ps-sync", [20.0]))))
    assert one["verdict"] == "undecided" and math.isnan(one["lead"])
    assert "one seed" in convergence_answer.verdict_line(one)


def test_a_family_that_never_reaches_the_target_loses_only_on_two_seeds_of_each():
    never = convergence_answer.verdict(convergence_settings.strategies(frame(
        converged("allreduce", [2.0, 2.5]), converged("ps-async", [None, None]), converged("ps-sync", [None, None]))))
    assert never["verdict"] == "allreduce" and never["parameter_servers"] in ("ps-async", "ps-sync")
    assert "(only allreduce reached it, in every seed)" in convergence_answer.verdict_line(never)
    some = convergence_answer.verdict(convergence_settings.strategies(
        frame(converged("allreduce", [2.0, 2.5]), converged("ps-sync", [3.0, None]))))
    assert some["verdict"] == "undecided"
    # a family's best is the one that reached it in every seed, though another of it is faster in some
    best = convergence_answer.verdict(convergence_settings.strategies(frame(
        converged("allreduce", [2.0, 2.5]), converged("ps-sync", [9.0, 9.5]), converged("ps-async", [1.0, None]))))
    assert best["parameter_servers"] == "ps-sync" and best["verdict"] == "allreduce"


def with_convergence() -> pd.DataFrame:
    return pd.concat([matrix(), frame(converged("multi-tower", [1.0, 1.1]), converged("ps-async", [None, None]),
                                      converged("ps-sync", [7.0, 7.4]), converged("allreduce", [1.7, 1.9]),
                                      converged("local-sgd", [1.2, 1.1]))], ignore_index=True)


def test_the_terminals_answer_holds_the_time_to_accuracy_block_within_its_lines(tmp_path):
    runs = with_convergence()
    lines = answer.lines(*answered(runs))
    assert len(lines) <= answer.ANSWER_LINES - 1 and all(len(line) <= answer.ANSWER_WIDTH for line in lines)
    text = "\n".join(lines)
    assert "Time to accuracy 0.82 on teacher (mlp, 4 workers; 2 seeds each" in text
    assert any(line.split()[:1] == ["ps-async"] and "not reached, best 0.370" in line for line in lines)
    assert "To accuracy: allreduce (allreduce 4.00x sooner than ps-sync, needs" in text
    assert "Parameter servers or allreduce, measured here" in text  # the throughput answer stays
    convergence_answer.write(convergence_settings.strategies(runs), tmp_path)
    rows = pd.read_csv(tmp_path / convergence_answer.CONVERGENCE_FILE)
    assert set(rows["kind"]) == {"strategy", "families"} and len(rows[rows["kind"] == "strategy"]) == 5
    families = rows[rows["kind"] == "families"].iloc[0]
    assert (families["verdict"], families["parameter_servers"]) == ("allreduce", "ps-sync")


def test_every_strategys_convergence_run_leaves_the_answer_the_verdict_and_where_the_rest_is():
    runs = pd.concat([with_convergence(), frame(*(converged(s, [1.0, 1.0], workers=4) for s in ("ps-async",)))])
    many = frame(*(converged(s, [1.0 + i, 1.5 + i]) for i, s in enumerate(FAMILY)),
                 *([{**r, "variant": f"{r['variant']} b"} for r in converged("allreduce", [3.0, 3.0])],),
                 *([{**r, "variant": f"{r['variant']} c"} for r in converged("ps-sync", [4.0, 4.0])],),
                 *([{**r, "variant": f"{r['variant']} d"} for r in converged("local-sgd", [4.0, 4.0])],))
    block = convergence_answer.lines(convergence_settings.strategies(many))
    assert len(block) == 3 and convergence_answer.CONVERGENCE_FILE in block[-1] and "To accuracy" in block[1]
    assert len(convergence_answer.lines(convergence_settings.strategies(runs))) == 7


def test_the_report_opens_on_the_answer_and_lists_what_was_left_out_at_its_end(monkeypatch):
    from bench.analysis.report import build, families, sections

    runs = with_convergence()
    folded = verdict.Verdicts.of(runs)
    answer_section = sections.family_answer(families.measured(folded), folded.convergence)
    assert 'id="convergence-answer"' in answer_section and "To accuracy: allreduce" in answer_section
    monkeypatch.setattr(sections, "all_sections", lambda *a: [answer_section, '<section id="runs"><h2>r</h2>'])
    left = [f"throughput: allreduce-tf cnn x{n}" for n in (2, 4)]
    page = build.render(verdict.Verdicts.of(runs), [],
                        "The compare preset: 80 runs in 9.5 min. 2 left out: listed at the end.",
                        appendix=("Sized by a budget of 10.0 min.", left))
    first = page.index("<section")
    assert page[first:].startswith('<section id="families">') and all(line not in page[:first] for line in left)
    last = page.rindex("<section")
    assert page[last:].startswith('<section id="left-out">') and "Sized by a budget of 10.0 min." in page[last:]
    assert all(line in page[last:] for line in left)


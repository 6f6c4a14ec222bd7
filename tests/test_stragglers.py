"""The stragglers-and-failures preset, end to end and small: what must hold on any machine."""

import html
import json
import re

import pandas as pd
import pytest

from bench.drivers.presets.stragglers import plan, planned
from tests.processes import PRESET_LIMIT_S, bench, leftover_processes

pytestmark = pytest.mark.slow
# 120 global steps: with a backup worker the other makes them all alone in about 1 s, and the 3x straggler
# must record steps past its first two, which are slow (TensorFlow's first calls, tripled): beside the
# suite, a busy process and a Horovod build, 60 steps left it 2 (its first took 0.79 s), beside one busy
# process 3 and 11
WORKERS, STEPS = 2, 120
VARIANTS = ("ps-sync R=N", "ps-sync R=N-1")  # ps-async: its killed worker in tests/test_ps.py


@pytest.fixture(scope="module")
def preset(tmp_path_factory):
    out = tmp_path_factory.mktemp("stragglers")
    done = bench("stragglers", "--workers", str(WORKERS), "--model", "mlp", "--steps", str(STEPS),
                 "--variants", ",".join(VARIANTS), "--convergence-steps", "0", "--output", str(out),
                 timeout=PRESET_LIMIT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (out / "report.html").is_file() and (out / "summary.csv").is_file()
    folder = next(out.glob("stragglers-*"))
    return folder


def run_dir(root, scenario, variant):
    # by the recorded name, exactly: "ps-syncRN" is a prefix of "ps-syncRN-1"
    name = f"stragglers-{scenario}-{variant.replace(' ', '').replace('=', '')}"
    found = [p.parent for p in root.glob("*/run.json")
             if json.loads(p.read_text())["config"].get("run_name") == name]
    assert len(found) == 1, (name, found)
    return found[0]


def table_rows(folder, css_id: str, key) -> dict:
    """The rows of the report's table `css_id`, each a {column: exact value}, by key(row)."""
    page = (folder / "report.html").read_text()
    body = page[page.index(f'<table id="{css_id}">'):]
    body = body[: body.index("</table>")]
    out = {}
    for row in re.findall(r"<tr data-run=[^>]*>(.*?)</tr>", body):
        values = {c: html.unescape(v) for c, v in re.findall(r'data-col="([^"]+)" data-value="([^"]*)"', row)}
        out[key(values)] = values
    return out


def shown(folder) -> dict[str, dict[str, str]]:
    return table_rows(folder, "stragglers-table", lambda row: row["variant"])


def test_the_preset_ran_every_chosen_case_and_reports_each(preset):
    summary = pd.read_csv(preset / "summary.csv")
    assert len(summary) == 5 * len(VARIANTS)  # clean, straggler, kill, recover, ps-kill
    assert set(shown(preset)) == set(VARIANTS)


def median_steps(folder) -> pd.Series:
    """Each worker's median step (past its first two), in seconds."""
    steps = pd.read_csv(folder / "steps.csv")
    steps = steps[steps["local_step"] >= 2]
    return (steps["t_end_s"] - steps["t_start_s"]).groupby(steps["worker"]).median()


def test_a_3x_straggler_takes_about_3x_as_long_per_step(preset):
    # Against the other worker of the same run, which shares the machine's load at the same
    # moments: a run seconds before or after may see another load (CI's setup tests build Horovod
    # beside the suite), so a ratio across runs moves with it (2.36 once beside two busy processes,
    # where the test asked for 2). With a backup worker the other never waits for the straggler, so
    # the ratio is 3x times how much more the straggler's own step contends: it computes while the
    # other always does too, the other a third of the time alone. Measured 3.6-3.9 beside two busy
    # processes, 6.2 on an idle VM (16.8 ms against 2.7); above 9 the straggler would contend 3x.
    straggler = run_dir(preset, "straggler", "ps-sync R=N-1")
    steps = median_steps(straggler)
    assert 2.0 < steps[1] / steps[0] < 9.0, steps
    assert json.loads((straggler / "run.json").read_text())["config"]["straggler"] == "1:3"


def test_ps_sync_r_n_waits_for_the_straggler_and_a_backup_worker_does_not(preset):
    # every step of R = N waits for the straggler's gradient: most of worker 0's step is waiting. Read
    # within the run: the fraction of the clean run's throughput kept (the report's table) compares two
    # runs, and read 0.77 once beside the first-run tests' Horovod build (0.40 on an idle VM)
    split = json.loads((run_dir(preset, "straggler", "ps-sync R=N") / "run.json").read_text())["summary"]["breakdown"]
    other = split["per_worker"]["0"]
    assert other["waiting"]["p50_s"] > 0.5 * other["step"]["p50_s"], other
    # so under R = N worker 0 steps in lockstep with the straggler: each of its steps ends when the
    # straggler's gradient arrives (medians within 2% of each other in 3 runs beside two busy
    # processes). Compared within the run: across runs the machine's load may differ (worker 0's
    # R = N step against its R = N-1 step read 1.96 once, in CI).
    lockstep = median_steps(run_dir(preset, "straggler", "ps-sync R=N"))
    assert lockstep[0] > 0.75 * lockstep[1], lockstep
    # R = N-1 (here 1 of 2) applies the first gradient of a step, so worker 0 never waits for the
    # straggler and steps far more often: the straggler's gradient is in under half the steps.
    steps = pd.read_csv(run_dir(preset, "straggler", "ps-sync R=N-1") / "steps.csv")
    taken = steps[steps["global_step"] <= STEPS]
    with_straggler = taken[(taken["worker"] == 1) & (taken["applied"] == 1)]["global_step"].nunique()
    assert with_straggler < 0.5 * STEPS
    assert (taken.groupby("global_step")["applied"].sum() == WORKERS - 1).all()


def test_a_straggler_shows_as_its_own_compute_and_the_others_waiting(preset):
    from bench.run.process.breakdown import per_worker_medians

    clean, slow = (per_worker_medians(run_dir(preset, scenario, "ps-sync R=N"), 5)
                   for scenario in ("clean", "straggler"))
    # R = N: every step waits for worker 1, whose steps take 3x as long
    assert slow.loc[1, "compute_s"] > 2 * clean.loc[1, "compute_s"], (clean, slow)
    assert slow.loc[0, "waiting_s"] > 2 * clean.loc[0, "waiting_s"], (clean, slow)
    assert slow.loc[0, "waiting_s"] > slow.loc[1, "waiting_s"], slow
    record = json.loads((run_dir(preset, "straggler", "ps-sync R=N") / "run.json").read_text())
    assert record["summary"]["breakdown"]["slowest_worker"] == 1
    page = (preset / "report.html").read_text()
    split = page[page.index('<section id="breakdown">'):]
    assert split[: split.index("</section>")].count("<svg") == 2  # the typical worker, and each worker


def test_a_killed_worker_ends_r_n_and_the_others_go_on(preset):
    table = shown(preset)
    assert table["ps-sync R=N-1"]["kill"] == "finished without worker 1"
    assert table["ps-sync R=N"]["kill"].startswith("failed fast: ")
    record = json.loads((run_dir(preset, "kill", "ps-sync R=N") / "run.json").read_text())
    assert record["status"] == "failed: worker 1 was killed by SIGKILL"
    record = json.loads((run_dir(preset, "kill", "ps-sync R=N-1") / "run.json").read_text())
    assert record["lost_workers"] == ["worker 1"] and record["summary"]["global_steps"] >= STEPS
    assert not leftover_processes(str(preset))


def recovery_rows(folder) -> dict[tuple[str, str], dict[str, str]]:
    return table_rows(folder, "recovery-table", lambda row: (row["variant"], row["failure"]))


def test_the_recovery_section_shows_what_each_restart_cost(preset):
    rows = recovery_rows(preset)
    assert set(rows) == {(v, f) for v in VARIANTS for f in ("worker 1", "ps 0")}
    for variant in VARIANTS:
        worker, ps = rows[variant, "worker 1"], rows[variant, "ps 0"]
        assert worker["status"] == ps["status"] == "ok"
        assert worker["recovered_by"] == "worker restarted" and float(worker["recovery_steps_lost"]) == 0
        # the job goes on from its latest checkpoint (every STEPS // 3 steps) before the kill at STEPS // 2
        assert ps["recovered_by"] == "job restarted from checkpoint"
        assert 0 < float(ps["recovery_steps_lost"]) <= STEPS // 3
        for row in (worker, ps):
            assert row["recoveries"] == "1" and float(row["recovery_downtime_s"]) > 0
            assert float(row["recovery_time_lost_s"]) > 0  # a step begun after the failure took time
        record = json.loads((run_dir(preset, "ps-kill", variant) / "run.json").read_text())
        assert len(record["resumed_at"]) == 1 and record["summary"]["global_steps"] >= STEPS
        # the workers hold at the kill's step until it is done: one more step at most, each worker's last
        [rec] = record["summary"]["recoveries"]
        assert STEPS // 2 <= rec["step_at_failure"] < STEPS // 2 + WORKERS, rec


def test_the_section_shows_the_measured_fraction(preset):
    summary = pd.read_csv(preset / "summary.csv")
    table = shown(preset)
    for variant in VARIANTS:
        rates = summary[summary["variant"] == variant].set_index("scenario")["throughput_examples_per_s"]
        assert float(table[variant]["fraction"]) == pytest.approx(rates["straggler"] / rates["clean"], rel=1e-9)


def test_the_full_preset_covers_every_strategy_and_scenario():
    runs, refused = planned(4, 100, 300)
    labels = [label for label, _ in runs]
    for variant in ("ps-async", "ps-sync R=N", "ps-sync R=N-1", "ps-coordinator", "allreduce", "allreduce-tf"):
        for scenario in ("clean", "straggler", "kill", "recover"):
            assert (f"{variant} {scenario}" in labels) != (variant == "ps-coordinator" and scenario == "straggler")
        assert (f"{variant} ps-kill" in labels) == variant.startswith("ps-")
    # a case its strategy refuses is left out, with the strategy's reason
    assert refused == ["ps-coordinator straggler: --straggler acts in a worker's own step loop; ps-coordinator's "
                       "workers only run the functions its coordinator schedules"]
    # --recover without checkpoints where a strategy saves none: its workers are restarted, nothing else
    args = dict(runs)
    assert "--checkpoint-every-steps" in args["ps-async recover"]
    assert "--recover" in args["ps-coordinator recover"] and "--checkpoint-every-steps" not in args[
        "ps-coordinator recover"]
    assert sum("convergence" in label for label in labels) == 4
    assert not [label for label, _ in plan(4, 100, 0) if "convergence" in label]


def test_what_the_slowest_worker_cost_the_others_is_recorded_and_said(preset):
    # R = N: the other worker waits, every step, for the 2/3 of the straggler's step that its 3x slowdown
    # added (its own step, in the same run: a figure across runs moves with the machine's load between
    # them). Measured on an idle AVX2 VM: 12.2 ms caused against 11.9 from the straggler's step, and
    # against 14.4 from the clean case's (2 x its 7.2 ms step).
    straggler = run_dir(preset, "straggler", "ps-sync R=N")
    record = json.loads((straggler / "run.json").read_text())
    split = record["summary"]["breakdown"]
    assert split["slowest_worker"] == 1
    assert split["waiting_caused_s"] == pytest.approx((3 - 1) / 3 * median_steps(straggler)[1], rel=0.2)
    assert record["summary"]["throughput_without_slowest_examples_per_s"] > record["summary"][
        "throughput_examples_per_s"]
    page = html.unescape((preset / "report.html").read_text())
    assert re.search(r"ps-sync R=N mlp x2: worker 1 is the slowest \(its compute [0-9.]+x the others'\); the "
                     r"others waited [0-9.]+ ms per step for it", page)

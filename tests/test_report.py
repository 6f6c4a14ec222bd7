import html
import json
import re
import shutil
import subprocess
import sys

import pandas as pd
import pytest

from bench.analysis.report.build import write_report
from bench.analysis.report.verdict import WIDE_SHARE
from bench.cli import main
from tests.conftest import ROOT
from tests.processes import RUN_LIMIT_S

SECTIONS = ["headline", "throughput", "scaling", "runs", "convergence", "time-to-accuracy", "step-times",
            "breakdown", "staleness", "failed", "environment"]


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory, request):
    """Real runs, made here: a baseline, two multi-device strategies, a convergence run, a failure."""
    out = tmp_path_factory.mktemp("runs")
    common = ["--data", "synthetic", "--steps", "30", "--warmup-steps", "5", "--eval-every", "0",
              "--output", str(out)]
    assert main(["--strategy", "single", "--run-name", "throughput-single", *common]) == 0
    for strategy in ("multi-tower", "mirrored"):
        assert main(["--strategy", strategy, "--workers", "2", "--run-name", f"throughput-{strategy}",
                     *common]) == 0
    assert main(["--strategy", "single", "--data", "digits", "--steps", "100", "--eval-every", "20",
                 "--run-name", "convergence-single", "--output", str(out)]) == 0
    mp = pytest.MonkeyPatch()
    from strategies.workers.multi_tower import MultiTowerWorker

    def on_fire(self, stamped=False):
        raise RuntimeError("tower on fire")

    mp.setattr(MultiTowerWorker, "step", on_fire)
    assert main(["--strategy", "multi-tower", "--workers", "2", "--run-name", "throughput-broken", *common]) == 1
    mp.undo()
    write_report([out], out)
    return out


def test_every_section_and_one_row_per_run(report_dir):
    page = (report_dir / "report.html").read_text()
    for ident in SECTIONS:
        assert f'<section id="{ident}">' in page
    summary = pd.read_csv(report_dir / "summary.csv")
    assert len(summary) == 5 and summary["run_id"].is_unique
    assert page.count("<svg") >= 5


def cells(page: str, table_id: str) -> dict[tuple[str, str], str]:
    body = page[page.index(f'<table id="{table_id}">'):]
    body = body[: body.index("</table>")]
    out = {}
    for row in re.finditer(r'<tr data-run="([^"]*)">(.*?)</tr>', body):
        for col, value in re.findall(r'data-col="([^"]+)" data-value="([^"]*)"', row.group(2)):
            out[(html.unescape(row.group(1)), col)] = html.unescape(value)
    return out


def rows(page: str, table_id: str) -> list[dict[str, str]]:
    body = page[page.index(f'<table id="{table_id}">'):]
    body = body[: body.index("</table>")]
    return [{col: html.unescape(v) for col, v in re.findall(r'data-col="([^"]+)" data-value="([^"]*)"', row)}
            for row in re.findall(r"<tr data-run=[^>]*>(.*?)</tr>", body)]


def section_of(page: str, ident: str) -> str:
    body = page[page.index(f'<section id="{ident}">'):]
    return body[: body.index("</section>")]


def test_each_section_shows_the_runs_it_is_about(report_dir):
    page = (report_dir / "report.html").read_text()
    summary = pd.read_csv(report_dir / "summary.csv").set_index("run_id")
    throughput_run = summary["throughput_examples_per_s"]
    by_name = {run_id.split("-", 2)[-1].rsplit("-", 1)[0]: run_id for run_id in summary.index}
    assert {"throughput-single", "throughput-multi-tower", "throughput-mirrored"} <= set(by_name), by_name
    # headline: the fastest of the 2-worker strategies, with its own measured rate; a figure whose interval is too
    # wide to rank (a 25-step run on a busy machine may be) is left out of it and named
    head = {(r["model"], r["workers"]): r for r in rows(page, "headline-table")}

    def ranked(name: str) -> bool:
        run_id = by_name[f"throughput-{name}"]
        return summary.loc[run_id, "throughput_ci95_examples_per_s"] / throughput_run[run_id] <= WIDE_SHARE

    rivals = {s: throughput_run[by_name[f"throughput-{s}"]] for s in ("multi-tower", "mirrored") if ranked(s)}
    for name in ("multi-tower", "mirrored", "single"):
        assert ranked(name) or f"mlp {name} x" in section_of(page, "headline"), name
    if rivals:
        best = max(rivals, key=rivals.get)
        two = head[("mlp", "2")]
        assert two["fastest"] == best and two["runner_up"] in ("", *rivals)
        assert float(two["throughput_examples_per_s"]) == pytest.approx(rivals[best], rel=1e-12)
    else:
        assert ("mlp", "2") not in head
    if ranked("single"):
        assert float(head[("mlp", "1")]["throughput_examples_per_s"]) == pytest.approx(
            throughput_run[by_name["throughput-single"]], rel=1e-12)
    # figures: each names the strategies it plots, and none says it has nothing to show
    for ident in ("throughput", "scaling", "step-times"):
        body = section_of(page, ident)
        assert "<svg" in body and "No throughput runs" not in body and "Needs a 1-worker" not in body
        for strategy in ("multi-tower", "mirrored"):
            assert f">{strategy}<" in body, (ident, strategy)
    assert "<svg" in section_of(page, "convergence")
    # time to accuracy: the convergence run's own figures
    tta = {r["run_id"]: r for r in rows(page, "tta-table")}
    conv = by_name["convergence-single"]
    assert set(tta) == {conv}
    for col in ("time_to_target_s", "steps_to_target", "best_accuracy", "startup_s"):
        assert float(tta[conv][col]) == pytest.approx(float(summary.loc[conv, col]), rel=1e-12)
    assert 0.9 <= float(tta[conv]["best_accuracy"]) <= 1.0
    env = rows(page, "env-table")
    recorded = json.loads((report_dir / conv / "run.json").read_text())["environment"]
    assert len(env) == 1 and env[0]["tensorflow"] == recorded["tensorflow"] and env[0]["host"] == recorded["host"]


def test_numbers_in_the_html_match_summary_csv(report_dir):
    page = (report_dir / "report.html").read_text()
    shown = cells(page, "runs-table")
    summary = pd.read_csv(report_dir / "summary.csv")
    checked = 0
    for _, row in summary.iterrows():
        for col in ("throughput_examples_per_s", "scaling_efficiency", "step_time_p50_s", "workers"):
            value = shown[(row["run_id"], col)]
            if pd.isna(row[col]):
                assert value == ""
            else:
                assert float(value) == pytest.approx(float(row[col]), rel=1e-12)
                checked += 1
    assert checked >= 12
    efficiency = summary.set_index("run_id")["scaling_efficiency"].dropna()
    assert len(efficiency) >= 3 and (efficiency > 0).all()


def test_the_split_of_step_time_shows_every_throughput_run(report_dir):
    page = (report_dir / "report.html").read_text()
    summary = pd.read_csv(report_dir / "summary.csv").set_index("run_id")
    shown = cells(page, "breakdown-table")
    finished = summary[(summary["purpose"] == "throughput") & (summary["status"] == "ok")]
    assert {run for run, _ in shown} == set(finished.index)
    for run in finished.index:
        for part in ("compute", "communication", "waiting", "other"):
            assert float(shown[(run, f"{part}_p50_s")]) == pytest.approx(summary.loc[run, f"{part}_p50_s"], rel=1e-9)
        assert float(shown[(run, "compute_p50_s")]) > 0
    assert section_of(page, "breakdown").count("<svg") == 2  # per strategy, and per worker


def test_a_failed_run_appears_with_its_reason(report_dir):
    page = (report_dir / "report.html").read_text()
    failed = cells(page, "failed-table")
    reasons = [v for (run, col), v in failed.items() if col == "status"]
    assert reasons == ["failed: RuntimeError: tower on fire"]


def test_the_page_fetches_nothing(report_dir):
    page = (report_dir / "report.html").read_text()
    assert not re.search(r'(src|href)\s*=\s*["\']?(https?:|//)', page)
    assert "<script" not in page


def slowed_copy(report_dir, folder, factor: float, leave_out: str):
    """The report's runs as a baseline whose throughput is `factor` times theirs, without one setting."""
    import json

    for run in report_dir.iterdir():
        record_file = run / "run.json"
        if not record_file.is_file() or leave_out in run.name:
            continue
        shutil.copytree(run, folder / run.name)
        record = json.loads(record_file.read_text())
        if (record.get("summary") or {}).get("throughput_examples_per_s") is not None:
            record["summary"]["throughput_examples_per_s"] *= factor
        (folder / run.name / "run.json").write_text(json.dumps(record))


def test_baseline_adds_ratios(report_dir, tmp_path):
    baseline, out = tmp_path / "baseline", tmp_path / "out"
    slowed_copy(report_dir, baseline, 0.5, leave_out="throughput-mirrored")
    done = subprocess.run([sys.executable, "-m", "bench", "report", str(report_dir), "--baseline", str(baseline),
                           "--output", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=RUN_LIMIT_S)
    assert done.returncode == 0, done.stderr
    summary = pd.read_csv(out / "summary.csv").set_index("run_id")
    ratio = summary["throughput_vs_baseline"]
    done = summary["status"] == "ok"
    ok = done & ~summary.index.str.contains("throughput-mirrored")
    assert ok.sum() == 3 and list(ratio[ok]) == pytest.approx([2.0] * 3, rel=1e-12)
    # a setting the baseline lacks, and a failed run, get no ratio
    assert ratio[summary.index.str.contains("throughput-mirrored")].isna().all()
    assert (~done).sum() == 1 and ratio[~done].isna().all()
    shown = cells((out / "report.html").read_text(), "runs-table")
    for run_id in summary.index[ok]:
        assert float(shown[(run_id, "throughput_vs_baseline")]) == pytest.approx(2.0, rel=1e-12)


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def test_a_real_browser_renders_the_report_offline(report_dir, tmp_path):
    browser = chromium()
    if browser is None:
        pytest.skip("no Chromium here: ./run_bench.sh test installs Debian's chromium where it can (root, apt)")
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
             "--disable-background-networking", "--disable-component-update", f"--user-data-dir={tmp_path}",
             # networking off: every host resolves to nothing and every proxy is a dead port
             "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9", "--virtual-time-budget=5000"]
    url = (report_dir / "report.html").resolve().as_uri()
    # Chromium loading a local file: 2-5 s here
    dom = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True, timeout=RUN_LIMIT_S).stdout
    assert dom.count("<table") >= 5 and dom.count("<svg") >= 5
    shot = tmp_path / "report.png"
    subprocess.run([*flags, f"--screenshot={shot}", "--window-size=1200,2400", url], capture_output=True,
                   timeout=RUN_LIMIT_S)
    from matplotlib.image import imread

    pixels = imread(shot)[..., :3]
    # text, tables and axes are grey; only the plotted lines and markers are coloured
    coloured = (pixels.max(axis=2) - pixels.min(axis=2)) > 0.3
    assert coloured.sum() > 1000


def test_scaling_efficiency_divides_by_the_median_of_the_baselines_runs():
    from bench.analysis.report import aggregate

    def run(strategy: str, rate: float, baseline: bool) -> dict:
        return {"ok": True, "scaling_baseline": baseline, "workers": 1, "model": "cnn", "data": "synthetic",
                "batch_size": 64, "strategy": strategy, "throughput_examples_per_s": rate}

    # one comparison's three baseline runs on this machine: the first disturbed throughout
    runs = pd.DataFrame([run("single", 1611, True), run("single", 2451, True), run("single", 2871, True),
                         run("mirrored", 2664, False)])
    efficiency = aggregate.add_scaling_efficiency(runs).set_index("strategy")["scaling_efficiency"]
    assert efficiency["mirrored"] == pytest.approx(2664 / 2451)
    assert sorted(efficiency["single"]) == pytest.approx([1611 / 2451, 1.0, 2871 / 2451])


def test_the_why_section_names_each_strategys_largest_part_of_its_step():
    from bench.analysis.report.why import sentence, shares

    runs = pd.DataFrame([
        {"model": "cnn", "workers": 4, "link_mbit": 100.0, "variant": "ps-sync R=N", "compute_p50_s": 0.02,
         "communication_p50_s": 0.061, "waiting_p50_s": 0.01, "other_p50_s": 0.009, "mfu": 0.012},
        {"model": "cnn", "workers": 4, "link_mbit": 10000.0, "variant": "allreduce", "compute_p50_s": 0.05,
         "communication_p50_s": 0.002, "waiting_p50_s": 0.001, "other_p50_s": 0.002, "mfu": 0.3}])
    rows = shares(runs)
    said = [sentence(row) for _, row in rows.iterrows()]
    assert said[0] == ("ps-sync R=N, cnn x4 @100 Mbit/s: 61 % of its 100 ms step is communication the compute did "
                       "not hide; MFU 1.2 %.")
    # the step to three significant digits
    assert said[1].startswith("allreduce, cnn x4 @10000 Mbit/s: 91 % of its 55.0 ms step is compute; MFU 30 %")
    assert rows["compute_share"].add(rows["communication_share"]).add(rows["waiting_share"]).add(
        rows["other_share"]).round(9).eq(1).all()


def test_the_report_says_which_machines_its_runs_ran_on():
    from bench.analysis.report.build import machines

    runs = pd.DataFrame([{"cpu_model": "AMD EPYC", "cpu_count": 2, "cpu_extensions": "avx2"},
                         {"cpu_model": "AMD EPYC", "cpu_count": 2, "cpu_extensions": "avx2"},
                         {"cpu_model": "Intel Xeon", "cpu_count": 2, "cpu_extensions": None}])
    assert machines(runs) == "Machine: AMD EPYC (avx2), 2 cores; Intel Xeon (extensions not recorded), 2 cores. "


def test_a_run_without_its_machine_recorded_is_left_out_of_the_header():
    from bench.analysis.report.build import machines

    assert machines(pd.DataFrame([{"cpu_model": None, "cpu_count": None, "cpu_extensions": None}])) == ""
    assert machines(pd.DataFrame([{"cpu_model": "X", "cpu_count": None}])) == "Machine: X (extensions not recorded). "


def test_every_section_reads_the_settings_and_spread_its_report_folded(report_dir, tmp_path, monkeypatch):
    from bench.analysis.report import verdict

    calls = {"settings_of": 0, "rerun_spread": 0}
    def counting(name: str):
        real = getattr(verdict, name)

        def counted(*args):
            calls[name] += 1
            return real(*args)
        return counted

    for name in calls:
        monkeypatch.setattr(verdict, name, counting(name))
    write_report([report_dir], tmp_path)
    assert calls == {"settings_of": 1, "rerun_spread": 1}  # every section reads the one verdict.Verdicts


def test_a_run_measured_again_is_kept_in_the_records_and_left_out_of_every_ranking(report_dir, tmp_path):
    """As a budgeted comparison marks a run it measured again (its run.json's `superseded`), read back through
    the records: still a row of summary.csv and of the run table, and in no ranking."""
    from bench.drivers.presets.budgeted import SUPERSEDED
    from bench.run.process.records import RunFolder

    copy = tmp_path / "runs"
    shutil.copytree(report_dir, copy)
    mirrored = next(p for p in copy.iterdir() if "throughput-mirrored" in p.name)
    RunFolder(mirrored).update_run(superseded=SUPERSEDED)
    write_report([copy], copy)
    summary = pd.read_csv(copy / "summary.csv").set_index("run_id")
    assert summary.loc[mirrored.name, "superseded"] == SUPERSEDED
    page = (copy / "report.html").read_text()
    assert mirrored.name in section_of(page, "runs")
    assert all("mirrored" not in (row["fastest"], row["runner_up"]) for row in rows(page, "headline-table"))
    assert all(row.get("workers") != "2" or row["fastest"] == "multi-tower" for row in rows(page, "headline-table"))

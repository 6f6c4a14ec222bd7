import pandas as pd
import pytest

from bench.analysis.report.tradeoffs import headline, settings
from bench.drivers.presets import tradeoffs


def run(link, variant, family, tta, acc=0.85, asynchronous=False, sent=1000.0, steps=1500):
    return {"ok": True, "link_mbit": link, "variant": variant, "family": family, "asynchronous": asynchronous,
            "workers": 4, "steps": steps, "steps_to_target": None if tta is None else 10 * tta,
            "time_to_target_s": tta, "best_accuracy": acc, "target_accuracy": 0.82,
            "net_worker_sent_per_step": sent}


def test_the_plan_covers_every_variant_link_and_seed_with_the_same_steps_per_worker():
    runs = tradeoffs.plan([100, 1000], 3, 1500)
    assert len(runs) == 2 * 3 * len(tradeoffs.VARIANTS)
    by_name = {args[args.index("--run-name") + 1]: args for _, _, args in runs}
    ps_async = by_name["tradeoffs-100mbit-ps-async-s2"]
    assert ps_async[ps_async.index("--steps") + 1] == "6000"  # 4 workers x 1500 global steps
    assert ps_async[ps_async.index("--eval-every") + 1] == "400"
    local = by_name["tradeoffs-1000mbit-local-sgd-h16-s0"]
    assert local[local.index("--sync-period") + 1] == "16" and local[local.index("--steps") + 1] == "1500"
    assert all("--emulated-cluster" in args and "teacher" in args for _, _, args in runs)
    # Horovod's transport at its best on the emulated links
    horovod = [args for _, _, args in runs if args[args.index("--strategy") + 1] in ("allreduce", "local-sgd")]
    assert len(horovod) == 2 * 3 * 6 and all(args[args.index("--hvd-controller") + 1] == "gloo" for args in horovod)
    two = {args[args.index("--run-name") + 1]: args for _, _, args in tradeoffs.plan([100], 1, 200, workers=2)}
    small = two["tradeoffs-100mbit-ps-async-s0"]
    assert small[small.index("--workers") + 1] == "2" and small[small.index("--steps") + 1] == "400"


@pytest.mark.parametrize("argv", [["--variants", "nope"], ["--seeds", "0"], ["--links", "0"], ["--steps", "50"],
                                  ["--workers", "1"]])
def test_bad_preset_input_is_one_line_and_exit_2(argv, capsys, results):
    assert tradeoffs.main([*argv, "--output", str(results)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert list(results.iterdir()) == []


def test_the_section_ranks_families_per_link_by_time_to_target_over_seeds():
    rows = [run(100, "allreduce", "allreduce", t, sent=4000) for t in (30.0, 32.0, 31.0)]
    rows += [run(100, "local-sgd (H=16)", "parameter-averaging", t, sent=250) for t in (10.0, 11.0, 12.0)]
    rows += [run(100, "ps-async", "parameter-server", None, acc=0.3, asynchronous=True) for _ in range(3)]
    rows += [run(1000, "allreduce", "allreduce", t) for t in (5.0, 6.0, 7.0)]
    rows += [run(1000, "local-sgd (H=16)", "parameter-averaging", t) for t in (5.5, 6.5, 7.5)]
    table_ = settings(pd.DataFrame(rows))
    slow_link = table_[table_["link_mbit"] == 100].set_index("variant")
    assert slow_link.loc["local-sgd (H=16)", "time_to_target_s"] == pytest.approx(11.0)
    assert slow_link.loc["local-sgd (H=16)", "time_to_target_ci95"] == pytest.approx(2.484, abs=0.01)
    assert slow_link.loc["ps-async", "reached"] == 0 and not slow_link.loc["ps-async", "all_reached"]
    # bytes a worker sent: per step x its own steps (an asynchronous run's are a quarter of the global)
    assert slow_link.loc["allreduce", "bytes_to_target"] == pytest.approx(4000 * 310)
    assert slow_link.loc["ps-async", "bytes_per_run"] == pytest.approx(1000 * 1500 / 4)
    text = headline(table_)
    assert text.startswith("100 Mbit/s: parameter-averaging first (parameter-averaging local-sgd (H=16) 11.0 s")
    assert "not reached in every run: ps-async" in text
    assert "1000 Mbit/s: tie between allreduce and parameter-averaging" in text

"""A run's shared records are replaced whole: a task of the same run may read one while another writes it."""

import threading

from bench.run.process.records import RunFolder

NO_TENSORFLOW = True
READS = 3000  # a half-written file showed up within the first few hundred reads with a plain write


def test_a_task_report_read_while_it_is_rewritten_is_always_whole(tmp_path):
    folder = RunFolder(tmp_path)
    folder.write_task_report(1, {"rewrite": 0})
    folder.write_devices("worker", 1, {"role": "worker", "index": 1, "rewrite": 0})
    stop = threading.Event()

    def rewrite() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            folder.write_task_report(1, {"rewrite": n, "padding": "x" * 65536})
            folder.write_devices("worker", 1, {"role": "worker", "index": 1, "rewrite": n})

    writer = threading.Thread(target=rewrite)
    writer.start()
    try:
        for _ in range(READS):  # a chief started by hand reads every report as it closes the run
            assert 1 in folder.task_reports() and "worker 1" in folder.device_reports()
    finally:
        stop.set()
        writer.join()

"""Inside one training process: the harness that drives a strategy's Worker, its input feed,
progress, records and summary, and the run folder's run.json."""

"""What the harness costs each strategy: every strategy run through distbench against its own
minimal hand-written loop doing the same work (`python -m bench overhead`)."""

"""Errors the harness turns into one line and an exit status."""


class UsageError(Exception):
    """Bad input found before any work starts: printed as one line, exit status 2."""


class RunFailed(Exception):
    """A run started but could not finish; the message goes into run.json."""

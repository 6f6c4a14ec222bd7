"""The files the projection writes, named once: the report finds them by these names."""

PROJECTION_FILE = "projection.json"  # one projection's rows, beside the runs it came from or in --output

"""The projection model: cost terms of each family's step, and their calibration from
what the suite measured (alpha-beta fits of the micro-benchmark sweeps, step-time spread)."""

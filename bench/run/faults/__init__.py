"""Faults, injected and recovered from, in one place: a trainer's own death and slowness
(injection), the kills the launcher does for it (task_kill, kill_watch), and --recover's
restarts (recovery)."""

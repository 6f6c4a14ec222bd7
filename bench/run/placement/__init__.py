"""Which devices each process of a run sees, decided once, before TensorFlow starts in it (docs/gpus.md)."""

"""distbench: one harness, every TensorFlow distribution strategy."""

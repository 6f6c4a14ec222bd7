"""How each strategy trains: the Worker classes (TensorFlow), loaded in worker processes only."""

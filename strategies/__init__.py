"""Distribution strategies, one module each, registered by name."""

"""Buffer sizes and rounds of the micro-benchmarks (the bandwidth definitions are in bench.metrics)."""

FAST_SIZES = (64 * 1024, 4 * 2**20)
FULL_SIZES = tuple(4 * 1024 * 4**k for k in range(8))  # 4 KB ... 64 MB, float32
FAST_ROUNDS, FULL_ROUNDS = 3, 10

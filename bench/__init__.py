"""The benchmark suite behind ``make bench`` (measurements, not tests)."""

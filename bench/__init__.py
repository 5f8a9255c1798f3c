"""The benchmark suite of issue 5: `make bench` / `make bench-quick` (docs/performance.md)."""

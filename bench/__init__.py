"""On-demand benchmarks (not part of ``make test``); run one from the repository root as a
module, e.g. ``.venv/bin/python -m bench.bench_retrieval --help`` (bench/README.md).

Importing the package limits the native libraries' threads (``OMP_NUM_THREADS=2`` unless
already set) before any bench imports numpy or the embedding engine: two cores are shared.
"""

from bench.harness import limit_threads

limit_threads()

"""MLPerf Inference's LoadGen driven in-process (``accelbench loadgen``): the machinery of the ``loadgen``
scenario (:mod:`accelbench.scenarios.loadgen.scenario`).

- :mod:`.sut`: the query sample library (real images, pre-processed and resident on the device, as the
  MLPerf reference harness keeps its performance samples) and the one system under test of every
  scenario: a dispatcher thread that batches (Server's dynamic batching), pipelines its launches and
  answers LoadGen.
- :mod:`.run`: one case end to end (build, calibrate, each LoadGen test under telemetry, Server search).
- :mod:`.settings`: LoadGen's ``TestSettings`` from the spec: short runs for a sweep, or MLPerf's own
  rules (``--mlperf-rules``: LoadGen's built-in ``mlperf.conf``).
- :mod:`.results`: LoadGen's detail log read back into columns (figure of merit, latency percentiles,
  VALID/INVALID and why), and its accuracy log into top-1/top-5.
- :mod:`.search`: the highest Server QPS that is VALID, by bisection.

LoadGen is the ``mlcommons-loadgen`` package (``pip install 'accelbench[loadgen]'``), imported only in :mod:`.lib`.
"""

from accelbench.scenarios.loadgen import scenario  # noqa: F401  (registers the loadgen scenario)

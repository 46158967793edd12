"""The query sample library and the systems under test that answer LoadGen's queries.

As in MLPerf Inference's reference harness (mlcommons/inference, ``vision/classification_and_detection/
python/main.py``), pre-processing is outside the timed path: the QSL's samples are the real images,
decoded, resized, normalised and resident on the device before the test starts, so LoadGen's
``load_samples``/``unload_samples`` have nothing left to do. A query names sample indices; the SUT gathers
them on the device, runs the model and answers each sample with its top-5 class indices (int32, host
memory: the copy back is part of every answer, as a server's response is).

Two SUTs:

- :class:`InlineSUT` answers inside LoadGen's issue callback, in batches of at most ``max_batch``:
  SingleStream (one sample a query), MultiStream (8 samples a query), Offline (one query of every sample).
- :class:`BatchingSUT` (Server) queues the Poisson arrivals and a dispatcher thread forms batches: it
  takes the first waiting query, then more until ``max_batch`` or until ``batch_timeout_s`` has passed since
  the first (the dynamic batcher of NVIDIA Triton's ``max_queue_delay_microseconds``).

A backend that builds for one shape (``static_shapes``: CUDA graphs, a shape-specialised compile) gets one
forward per size in :func:`batch_sizes_built`; a batch is padded up to the next built size.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Callable, Sequence

TOP_K = 5


def batch_sizes_built(scenario: str, max_batch: int) -> list[int]:
    """Batch sizes a static-shape backend is built for, smallest first.

    SingleStream 1; MultiStream ``max_batch`` (its 8 samples a query); Offline ``max_batch`` (the last,
    partial batch is padded); Server 1, 4, 16, ... below ``max_batch``, then ``max_batch``: a factor of 4
    bounds the padding of a batch to 4x while keeping the number of builds (compilations, graphs) small.
    """
    if scenario != "Server":
        return [max_batch]
    sizes, b = [], 1
    while b < max_batch:
        sizes.append(b)
        b *= 4
    return sizes + [max_batch]


class SampleLibrary:
    """The QSL: ``images`` ``(N, C, H, W)`` on the device in the model's input dtype and memory format."""

    def __init__(self, images):
        self.images = images
        self.count = int(images.shape[0])

    def construct(self, lg) -> Any:
        """LoadGen's handle: every sample is a performance sample and already resident."""
        return lg.ConstructQSL(self.count, self.count, lambda idx: None, lambda idx: None)


class Runner:
    """Sample indices -> top-5 class indices: gather on the device, pad to a built size, forward, copy back.

    Args:
        forwards: ``{batch_size: forward}`` (:meth:`accelbench.backends.base.Backend.build_sizes`).
        static: pad every batch up to the next size in ``forwards`` (else the one forward takes any size).
        images: the QSL's resident images; channels_last: keep the gathered batch in NHWC.
        context: ``() -> context manager`` entered around every call (precision, inference mode; both are
            thread-local, and the calls come from LoadGen's or the dispatcher's thread).
    """

    def __init__(self, forwards: dict[int, Callable], static: bool, images, channels_last: bool,
                 context: Callable[[], Any]):
        self.forwards, self.sizes, self.static = forwards, sorted(forwards), static
        self.images, self.channels_last, self.context = images, channels_last, context
        self.model_s: dict[int, float] = {}

    def size_for(self, n: int) -> int:
        """The built batch size a batch of ``n`` runs as (``n`` itself when any size runs)."""
        if not self.static:
            return n
        return next((b for b in self.sizes if b >= n), self.sizes[-1])

    def gather(self, idx: Sequence[int]):
        """The batch of samples ``idx`` from the resident images, in the model's memory format."""
        import torch

        x = self.images.index_select(0, torch.as_tensor(list(idx), device=self.images.device))
        return x.contiguous(memory_format=torch.channels_last) if self.channels_last else x

    def forward(self, idx: Sequence[int]):
        """Logits of the samples ``idx`` (padded rows dropped), on the device."""
        n, size = len(idx), self.size_for(len(idx))
        x = self.gather(list(idx) + [idx[0]] * (size - n))
        fn = self.forwards[size] if self.static else self.forwards[self.sizes[-1]]
        return fn(x)[:n]

    def __call__(self, idx: Sequence[int]):
        """Top-5 class indices ``(len(idx), 5)`` int32 in host memory (numpy)."""
        import torch

        with self.context():
            logits = self.forward(idx)
            top = logits.float().topk(min(TOP_K, logits.shape[1]), dim=1).indices
        return top.to(torch.int32).cpu().numpy()

    def calibrate(self, device, reps: int = 5) -> dict[int, float]:
        """Median seconds of the forward alone (synchronised) at each built size: what the SUT adds on top
        of it is its overhead, and LoadGen's expected latency and QPS are set from it."""
        import statistics

        from accelbench.core.timing import sync

        for size in self.sizes:
            idx = [i % self.images.shape[0] for i in range(size)]
            times = []
            with self.context():
                for _ in range(reps + 1):
                    sync(device)
                    t0 = time.perf_counter()
                    self.forward(idx)
                    sync(device)
                    times.append(time.perf_counter() - t0)
            self.model_s[size] = statistics.median(times[1:])
        return self.model_s


class InlineSUT:
    """Answers each query in LoadGen's issue thread, ``max_batch`` samples at a time.

    Attributes:
        batches, samples: batches run and samples answered; service_s: seconds from a batch's start to its
            answer; overhead_s: service minus the forward's own time at that size (:meth:`Runner.calibrate`).
        error: the first exception a batch raised (the queries are still answered, empty, so LoadGen can
            finish; the case then fails with it).
    """

    def __init__(self, lg, runner: Runner, max_batch: int):
        self.lg, self.runner, self.max_batch = lg, runner, max_batch
        self.batches = self.samples = 0
        self.service_s = self.overhead_s = 0.0
        self.error: BaseException | None = None

    def construct(self) -> Any:
        return self.lg.ConstructSUT(self.issue, self.flush)

    def issue(self, queries) -> None:
        for start in range(0, len(queries), self.max_batch):
            self.answer(queries[start:start + self.max_batch])

    def flush(self) -> None:
        pass

    def answer(self, chunk) -> None:
        """Run one batch and complete its queries (empty answers after a failure)."""
        t0 = time.perf_counter()
        top = None
        if self.error is None:
            try:
                top = self.runner([q.index for q in chunk])
            except BaseException as exc:  # noqa: BLE001  (raised again by the scenario after the test)
                self.error = exc
        if top is None:
            self.lg.QuerySamplesComplete([self.lg.QuerySampleResponse(q.id, 0, 0) for q in chunk])
            return
        ptr, stride = top.ctypes.data, top.strides[0]
        self.lg.QuerySamplesComplete([self.lg.QuerySampleResponse(q.id, ptr + i * stride, stride)
                                      for i, q in enumerate(chunk)])
        dt = time.perf_counter() - t0
        self.batches, self.samples, self.service_s = self.batches + 1, self.samples + len(chunk), self.service_s + dt
        self.overhead_s += dt - self.runner.model_s.get(self.runner.size_for(len(chunk)), 0.0)

    def close(self) -> None:
        pass

    def columns(self, wall_s: float) -> dict[str, Any]:
        """``batches``, ``batch_size_mean``, ``sut_overhead_us_mean`` (per batch) and ``sut_busy_share``
        (service time over the test's wall time)."""
        n = self.batches or None
        return {"batches": self.batches, "batch_size_mean": self.samples / n if n else None,
                "sut_overhead_us_mean": 1e6 * self.overhead_s / n if n else None,
                "sut_busy_share": self.service_s / wall_s if wall_s else None}


class BatchingSUT(InlineSUT):
    """Server: LoadGen's issue thread only queues; a dispatcher thread batches and answers."""

    def __init__(self, lg, runner: Runner, max_batch: int, batch_timeout_s: float):
        super().__init__(lg, runner, max_batch)
        self.timeout_s = batch_timeout_s
        self.pending: queue.SimpleQueue = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._dispatch, name="accelbench-dispatcher", daemon=True)
        self.thread.start()

    def issue(self, queries) -> None:
        for q in queries:
            self.pending.put(q)

    def _dispatch(self) -> None:
        while True:
            first = self.pending.get()
            if first is None:
                return
            batch, deadline, stop = [first], time.perf_counter() + self.timeout_s, False
            while len(batch) < self.max_batch:
                wait = deadline - time.perf_counter()
                try:
                    q = self.pending.get(timeout=wait) if wait > 0 else self.pending.get_nowait()
                except queue.Empty:
                    break
                if q is None:
                    stop = True
                    break
                batch.append(q)
            self.answer(batch)
            if stop:
                return

    def close(self) -> None:
        """Stop the dispatcher (after the queries already queued)."""
        self.pending.put(None)
        self.thread.join()

"""The query sample library and the system under test that answers LoadGen's queries.

As in MLPerf Inference's reference harness (mlcommons/inference, ``vision/classification_and_detection/
python/main.py``), pre-processing is outside the timed path: the QSL's samples are the real images,
decoded, resized, normalised and resident on the device (in the model's dtype and memory format) before
the test starts, so LoadGen's ``load_samples``/``unload_samples`` have nothing left to do. A query names
sample indices; the SUT gathers them on the device, runs the model and answers each sample with its top-5
class indices (int32, copied to host memory: the copy back is part of every answer, as a server's
response is).

One SUT for every scenario (:class:`SUT`). LoadGen's issue callback only queues; one dispatcher thread,
which holds the precision's context for the whole test (autocast and inference mode are thread-local, and
autocast re-casts the weights whenever its region is re-entered), forms batches and answers them:

- batching: the queued samples, up to ``max_batch``; when the device is idle it waits up to
  ``batch_timeout_s`` after the first for more (Server's dynamic batching, NVIDIA Triton's
  ``max_queue_delay_microseconds``); 0 for SingleStream, MultiStream (a query's 8 samples arrive together)
  and Offline (one query of every sample, cut into ``max_batch`` batches);
- pipelining: a batch is launched before the previous one is answered, so the host's work (gathering,
  launching, answering LoadGen) overlaps the device's and the device never waits for Python; a batch is
  answered as soon as nothing else is waiting to be launched.

A backend that builds for one shape (``static_shapes``: CUDA graphs, a shape-specialised compile) gets one
forward per size in :func:`batch_sizes_built`; a batch is padded up to the next built size.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

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
        images: the QSL's resident images; channels_last: the model's memory format is NHWC.
        context: ``() -> context manager``: the precision's (autocast, inference mode).
    """

    def __init__(
        self, forwards: dict[int, Callable], static: bool, images, channels_last: bool, context: Callable[[], Any]
    ):
        self.forwards, self.sizes, self.static = forwards, sorted(forwards), static
        self.images, self.channels_last, self.context = images, channels_last, context
        self.model_s: dict[int, float] = {}

    def size_for(self, n: int) -> int:
        """The built batch size a batch of ``n`` runs as (``n`` itself when any size runs)."""
        if not self.static:
            return n
        return next((b for b in self.sizes if b >= n), self.sizes[-1])

    def gather(self, idx: Sequence[int]):
        """The batch of samples ``idx`` from the resident images, in the model's memory format (one sample
        is a view: no index copy to the device). Nothing here waits for the device: the pipelining in
        :class:`SUT` relies on it."""
        import torch

        if len(idx) == 1:
            x = self.images.narrow(0, int(idx[0]), 1)
        else:
            index = torch.as_tensor(list(idx), dtype=torch.int64)
            if self.images.is_cuda:  # from pinned memory, asynchronously: a pageable copy would wait for
                index = index.pin_memory().to(self.images.device, non_blocking=True)  # the batch in flight
            x = self.images.index_select(0, index)
        return x.contiguous(memory_format=torch.channels_last) if self.channels_last else x

    def forward(self, idx: Sequence[int]):
        """Logits of the samples ``idx`` (padded rows dropped), on the device."""
        n, size = len(idx), self.size_for(len(idx))
        x = self.gather(list(idx) + [idx[0]] * (size - n))
        fn = self.forwards[size] if self.static else self.forwards[self.sizes[-1]]
        return fn(x)[:n]

    def launch(self, idx: Sequence[int]) -> tuple[Any, Any]:
        """Queue the batch ``idx`` on the device: forward, top-5, copy to pinned host memory, an event.

        Returns:
            ``(host, event)``: the int32 ``(len(idx), 5)`` host tensor the answer lands in, and the CUDA
            event after its copy (None on a CPU: the answer is already there).
        """
        import torch

        logits = self.forward(idx)
        top = logits.float().topk(min(TOP_K, logits.shape[1]), dim=1).indices.to(torch.int32)
        if top.device.type != "cuda":
            return top, None
        host = torch.empty(top.shape, dtype=torch.int32, pin_memory=True)
        host.copy_(top, non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        return host, event

    def calibrate(self, device, reps: int = 5) -> dict[int, float]:
        """Median seconds of the forward alone (synchronised) at each built size: LoadGen's expected
        latency and QPS, and the Server search's capacity bound, come from it."""
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


class SUT:
    """LoadGen's system under test (see the module docstring).

    Attributes:
        batches, samples: batches run and samples answered.
        host_s: the dispatcher's own time (gathering, launching, answering; not waiting for the device or
            for queries): its share of the test's wall time says whether the host keeps up.
        error: the first exception a batch raised (its queries and all later ones are still answered,
            empty, so LoadGen can finish; the case then fails with it).
    """

    def __init__(self, lg, runner: Runner, max_batch: int, batch_timeout_s: float = 0.0):
        self.lg, self.runner, self.max_batch, self.timeout_s = lg, runner, max_batch, batch_timeout_s
        self.batches = self.samples = 0
        self.host_s = 0.0
        self.error: BaseException | None = None
        self.pending: queue.SimpleQueue = queue.SimpleQueue()
        self.carry: list = []  # samples taken off the queue, not yet in a batch
        self.stopping = False
        self.thread = threading.Thread(target=self._run, name="accelbench-sut", daemon=True)
        self.thread.start()

    def construct(self) -> Any:
        return self.lg.ConstructSUT(self.issue, self.flush)

    def issue(self, queries) -> None:
        self.pending.put(list(queries))

    def flush(self) -> None:
        pass

    def close(self) -> None:
        """Stop the dispatcher after the samples already queued."""
        self.pending.put(None)
        self.thread.join()

    def _take(self, item) -> None:
        if item is None:
            self.stopping = True
        else:
            self.carry.extend(item)

    def _fill(self, idle: bool) -> None:
        """Move queued samples into ``carry`` up to ``max_batch``. ``idle`` (nothing in flight): block for
        the first, then wait up to the batch timeout for more; else take only what is queued now."""
        if idle and not self.carry and not self.stopping:
            self._take(self.pending.get())
        deadline = time.perf_counter() + (self.timeout_s if idle else 0.0)
        while len(self.carry) < self.max_batch and not self.stopping:
            left = deadline - time.perf_counter()
            try:
                self._take(self.pending.get(timeout=left) if left > 0 else self.pending.get_nowait())
            except queue.Empty:
                return

    def _run(self) -> None:
        with self.runner.context():
            inflight = None
            while self.carry or not self.stopping:
                self._fill(idle=inflight is None)
                if not self.carry:
                    if inflight is not None:
                        self._answer(*inflight)
                        inflight = None
                    continue
                batch, self.carry = self.carry[: self.max_batch], self.carry[self.max_batch :]
                launched = (batch, self._launch(batch))
                if inflight is not None:
                    self._answer(*inflight)
                inflight = launched
            if inflight is not None:
                self._answer(*inflight)

    def _launch(self, batch) -> Any:
        if self.error is not None:
            return None
        t0 = time.perf_counter()
        try:
            out = self.runner.launch([q.index for q in batch])
        except BaseException as exc:  # noqa: BLE001  (raised again by the scenario after the test)
            self.error, out = exc, None
        self.host_s += time.perf_counter() - t0
        return out

    def _answer(self, batch, launched) -> None:
        """Wait for a launched batch and complete its queries (empty answers after a failure)."""
        top = None
        if launched is not None and self.error is None:
            host, event = launched
            try:
                if event is not None:
                    event.synchronize()
                top = host.numpy()
            except BaseException as exc:  # noqa: BLE001
                self.error = exc
        t0 = time.perf_counter()
        if top is None:
            self.lg.QuerySamplesComplete([self.lg.QuerySampleResponse(q.id, 0, 0) for q in batch])
        else:
            ptr, stride = top.ctypes.data, top.strides[0]
            self.lg.QuerySamplesComplete(
                [self.lg.QuerySampleResponse(q.id, ptr + i * stride, stride) for i, q in enumerate(batch)]
            )
            self.batches, self.samples = self.batches + 1, self.samples + len(batch)
        self.host_s += time.perf_counter() - t0

    def columns(self, wall_s: float) -> dict[str, Any]:
        """``batches``, ``batch_size_mean``, ``sut_host_us_per_batch`` and ``sut_host_share`` (the
        dispatcher's own time over the test's wall time: near 1, the host is the bottleneck)."""
        n = self.batches or None
        return {
            "batches": self.batches,
            "batch_size_mean": self.samples / n if n else None,
            "sut_host_us_per_batch": 1e6 * self.host_s / n if n else None,
            "sut_host_share": self.host_s / wall_s if wall_s else None,
        }

"""One timing sample in a fresh process: ``python -m fastprep.bench.worker '<json>'``.

The worker imports the competitor, loads the (already filtered) rows, then runs fit +
transform back to back: ``runs`` times, and more warm runs while they add up to less than
``warm_budget_s`` (up to ``max_runs`` in all) — a 20 ms call timed once per process is
mostly scheduler noise. Run 1 is **cold**: a fresh process whose output memory has never
been touched, so it pays for page faults the way a first call in a new job does. Later
runs are **warm**: they reuse the memory the previous run just freed; the harness takes
their median.

Peak memory is the kernel's own high-water mark: before each run the worker resets it
(``echo 5 > /proc/self/clear_refs``, Linux ≥ 4.0) and reads ``VmHWM`` after, so the peak is
that run's, including the loaded input. Where the reset is refused, a thread samples RSS
every millisecond instead (``method`` says which was used).

With ``warmup_rows`` in the spec (None: all rows) the worker first runs fit + transform
once, untimed and unmeasured, on that head of the frame, drops the result, calls
``fastprep.release_memory()`` (fastprep's retained arena and cached row
ids, and glibc's free heap pages, go back to the system; harmless for the other
competitors) and only then measures. Why: the cold run's peak also holds one-time costs —
JIT kernels loaded or compiled (some only past a size: parallel passes, the parallel
median), lazily imported modules, thread pools started — that the memory target
excludes (it is judged without one-time compilation). Warming up on the same rows loads exactly the
kernels the measured run uses; releasing afterwards keeps the measured run from reusing
the warm-up's memory and under-reporting. The harness uses it with ``runs: 1`` for the
**working memory** of a run: peak − RSS before it, with everything loaded.
"""

from __future__ import annotations

import gc
import json
import re
import sys
import threading
import time
from typing import Any

MIB = 1024 * 1024


def _status(field: str) -> int:
    with open("/proc/self/status") as handle:
        match = re.search(rf"^{field}:\s+(\d+) kB", handle.read(), re.MULTILINE)
    return int(match.group(1)) * 1024 if match else 0


class PeakMeter:
    """Peak RSS of the code run between :meth:`start` and :meth:`stop`."""

    def __init__(self) -> None:
        self.method = "VmHWM reset via /proc/self/clear_refs"
        try:
            self._reset()
        except OSError:
            self.method = "psutil RSS sampled every 1 ms"
        self._peak, self._running, self._thread = 0, False, None

    @staticmethod
    def _reset() -> None:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")

    def _sample(self) -> None:
        import psutil

        process = psutil.Process()
        while self._running:
            self._peak = max(self._peak, process.memory_info().rss)
            time.sleep(0.001)

    def start(self) -> int:
        """Reset the high-water mark; returns the RSS before the run (bytes)."""
        baseline = _status("VmRSS")
        if self.method.startswith("VmHWM"):
            self._reset()
        else:
            self._peak, self._running = baseline, True
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return baseline

    def stop(self) -> int:
        """The peak RSS (bytes) since :meth:`start`."""
        if self.method.startswith("VmHWM"):
            return _status("VmHWM")
        self._running = False
        assert self._thread is not None
        self._thread.join()
        return max(self._peak, _status("VmRSS"))


def sample(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one competitor ``spec["runs"]`` times on ``spec["data"]``; times and peaks
    (after an untimed warm-up on the first ``spec["warmup_rows"]`` rows — None: all —
    if the key is given)."""
    import pandas as pd

    from fastprep.bench.impls import get
    from fastprep.pipeline import load_pipeline_file

    pipeline = load_pipeline_file(spec["pipeline"])
    run = get(spec["impl"]).factory(pipeline)
    frame = pd.read_parquet(spec["data"])
    if spec.get("rows"):
        frame = frame.iloc[: spec["rows"]].reset_index(drop=True)
    warmup = "warmup_rows" in spec
    warmup_rows = len(frame) if spec.get("warmup_rows") is None else int(spec["warmup_rows"])
    warmup_s = None
    if warmup:
        from fastprep import release_memory

        head = frame.iloc[:warmup_rows]
        started = time.perf_counter()
        X, y = run(head)  # loads/compiles kernels, first imports; not a sample
        warmup_s = time.perf_counter() - started
        del X, y, head
        gc.collect()
        release_memory()
    meter = PeakMeter()
    seconds, peaks, baselines = [], [], []
    runs, budget, most = (
        spec.get("runs", 2),
        spec.get("warm_budget_s", 0.0),
        spec.get("max_runs", 2),
    )
    while len(seconds) < runs or (sum(seconds[1:]) < budget and len(seconds) < most):
        gc.collect()
        baselines.append(meter.start())
        started = time.perf_counter()
        X, y = run(frame)
        seconds.append(time.perf_counter() - started)
        peaks.append(meter.stop())
        del X, y
    return {
        "seconds": seconds,
        "peak_rss_mib": [p / MIB for p in peaks],
        "baseline_rss_mib": [b / MIB for b in baselines],
        "memory_method": meter.method,
        "rows": len(frame),
        "warmup_rows": min(warmup_rows, len(frame)) if warmup else 0,
        "warmup_s": warmup_s,
    }


def main() -> None:
    print(json.dumps(sample(json.loads(sys.argv[1]))))


if __name__ == "__main__":
    main()

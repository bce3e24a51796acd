"""Messages to every worker that a job sends without waiting for them (letting kept
values go at a job's end), settled before the next job on the same cluster starts.

``client.run(..., wait=False)`` still waits for the round trip (client -> scheduler ->
every worker -> back): 3-17 ms measured at the end of a 2-worker fit, on the job's
critical path while both workers sat idle. Here the message is handed to the client's
event loop and the caller goes on; the next fit on that scheduler waits for the ones
still on their way (by then long done), so a job never starts with the memory an
earlier job let go still held. A failure is logged, never raised: the message only
frees memory, and a worker that is gone took that memory with it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger("fastprep")

#: per scheduler address, the messages sent and not yet known to have arrived
_PENDING: dict[str, list[concurrent.futures.Future]] = {}

#: how long :func:`settle` waits for one message (a cluster that stopped answering)
SETTLE_SECONDS = 30.0


def run_unwaited(client: Any, function: Callable[..., Any], *args: Any) -> None:
    """``client.run(function, *args, wait=False, on_error="ignore")`` without waiting for
    it (``function`` a coroutine function: Dask runs an unwaited one on the worker's loop)."""
    try:
        address = client.scheduler.address
        coroutine = client.run(function, *args, wait=False, on_error="ignore", asynchronous=True)
        future = asyncio.run_coroutine_threadsafe(coroutine, client.loop.asyncio_loop)
    except (RuntimeError, AttributeError, OSError) as exc:  # a client closing or closed
        log.debug("fastprep: %s not sent to the workers: %s", function.__name__, exc)
        return
    future.add_done_callback(_log_failure)
    pending = [f for f in _PENDING.get(address, []) if not f.done()]
    _PENDING[address] = [*pending, future]


def settle(client: Any) -> None:
    """Wait for the messages still on their way to this client's cluster."""
    scheduler = getattr(client, "scheduler", None)
    for future in _PENDING.pop(getattr(scheduler, "address", None), []):
        # a failure was logged by _log_failure; a timeout: a cluster not answering, whose
        # job fails on its own
        with contextlib.suppress(Exception, concurrent.futures.CancelledError):
            future.result(timeout=SETTLE_SECONDS)


def _log_failure(future: concurrent.futures.Future) -> None:
    if future.cancelled():
        return
    exc = future.exception()
    if exc is not None:
        log.debug("fastprep: a message to the workers failed: %s: %s", type(exc).__name__, exc)

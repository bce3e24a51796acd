"""Fit and transform on a ``dask.distributed`` cluster, one task per partition.

Fit is a few full passes (one per level of fitted steps in the longest chain, plus one for
each level with a median); each pass maps
:func:`~fastprep.runtime.partition_tasks.fit_partials` over the partitions and merges the
partial aggregates here, in partition order. Transform maps
:func:`~fastprep.runtime.partition_tasks.transform_partition` and either gathers the outputs
into one matrix or writes shards and a manifest (see :mod:`fastprep.runtime.shards`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import secrets
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from distributed import Client, Future, KilledWorker, as_completed

from fastprep.api.schema import Schema
from fastprep.data.partitions import (
    ROWS_PER_PARTITION,
    PartitionSpec,
    path_identity,
    plan_partitions,
)
from fastprep.data.sources import Source, is_path, resolve_files, source_columns
from fastprep.emit import make_layout
from fastprep.errors import FastprepError, JobError, SourceError
from fastprep.plan.nodes import LogicalPlan
from fastprep.runtime import execute, shards
from fastprep.runtime.cluster.budget import in_budget
from fastprep.runtime.cluster.progress import Progress, ProgressArg
from fastprep.runtime.cluster.unwaited import run_unwaited, settle
from fastprep.runtime.cross_fit import CrossFit
from fastprep.runtime.levels import (
    Learned,
    check_fittable,
    fit_levels,
    later_chains,
    learned_list,
)
from fastprep.runtime.partition_tasks import (
    Job,
    PartitionFailed,
    RetryPolicy,
    Target,
    count_rows,
    drop_kept,
    drop_kept_soon,
    fit_partials,
    fit_partials_kept,
    transform_partition,
    transform_partitions,
)
from fastprep.runtime.report import Report
from fastprep.storage.output_format import Writing, check_codec
from fastprep.storage.shards import concat_rejected
from fastprep.storage.state import encode_floats
from fastprep.validate import drift
from fastprep.validate.findings import Finding
from fastprep.validate.table_checks import unexpected_column_findings

if TYPE_CHECKING:
    pass


def partitions_for(
    client: Client, source: Source, plan: LogicalPlan, rows_per_partition: int,
    retry: RetryPolicy, progress: Progress | None = None, reuse: bool = False,
) -> list[PartitionSpec]:  # fmt: skip
    """The source's partitions with every row offset known (CSV files counted on workers),
    balanced over the cluster's worker threads (:func:`fastprep.data.partitions.balanced_count`).
    ``reuse`` (a transform): the partitions last planned for the same files, unchanged, on
    this cluster (by its fit), whatever its workers now (see ``_PLANS``)."""
    if is_dask_frame(source):
        lengths = [int(n) for n in source.map_partitions(len).compute()]
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(int)
        return [
            PartitionSpec(i, "frame", path=f"dask:{source._name}", start=int(o),
                          stop=int(o) + n, n_rows=n, row_offset=int(o))
            for i, (n, o) in enumerate(zip(lengths, offsets))
        ]  # fmt: skip
    if not is_path(source):
        raise SourceError(
            "a distributed job reads its partitions inside the tasks: pass a Parquet/CSV "
            "path or glob (e.g. df.to_parquet('data.parquet', row_group_size=...)), not an "
            f"in-memory {type(source).__name__}"
        )
    address = client.scheduler.address
    try:
        signature: Any = (
            rows_per_partition,
            tuple((p, *path_identity(p)) for p in resolve_files(source)),
        )
    except OSError:  # a file gone: planning says which, as without this memo
        signature = None
    planned = _PLANS.get(address)
    if reuse and signature is not None and planned is not None and planned[0] == signature:
        return planned[1]
    specs = plan_partitions(source, rows_per_partition, worker_threads(client))
    if not all(s.row_offset is not None and s.n_rows is not None for s in specs):
        futures = [
            client.submit(in_budget, count_rows, s, retry, key=f"fastprep-count-{_token(s)}")
            for s in specs
        ]
        sizes = _results(client, futures, specs, "count rows", progress)
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
        specs = [replace(s, n_rows=int(n), row_offset=int(o))
                 for s, n, o in zip(specs, sizes, offsets)]  # fmt: skip
    if signature is not None:
        _PLANS[address] = (signature, specs)
    return specs


#: per scheduler, the last source's partitions and what they were planned from (rows per
#: partition; each file's path, size and modification time): a transform after its fit
#: runs the fit's partitions (a fit always plans for the workers it has), so partition
#: ``i`` is the same rows in both, the same worker's kept data, even when workers joined
#: or left in between (the transform is then balanced for the fit's workers); footers are
#: not read again, CSV rows not counted again. Any change to a file plans again.
_PLANS: dict[str, tuple[Any, list[PartitionSpec]]] = {}


def worker_threads(client: Client) -> int:
    """The threads a pass's tasks run on at once (at least 1: a cluster whose workers have
    not joined yet gets partitions as for one)."""
    return max(1, sum(client.nthreads().values()))


def largest_first(spec: PartitionSpec) -> int:
    """A task's Dask priority: the bigger partitions start first, so a small one (a file's
    last row groups) fills a worker's idle end of the pass instead of delaying a big one
    to it (largest processing time first); equal sizes keep the partition order."""
    return int(spec.n_rows or 0)


def submission_order(specs: list[PartitionSpec]) -> list[int]:
    """Positions of ``specs`` largest first: the scheduler sends the first tasks it gets to
    the idle workers before it has the others to order by priority, so the submission
    order itself is largest first (:func:`largest_first`)."""
    return sorted(range(len(specs)), key=lambda i: -largest_first(specs[i]))


def is_dask_frame(source: Any) -> bool:
    return hasattr(source, "to_delayed") and hasattr(source, "npartitions")


def _undeclared(schema: Schema, source: Any, phase: str) -> list[Finding]:
    """The source's columns the schema does not declare (``schema.unexpected`` decides:
    reported, or a ``SchemaError`` before any task), told from its names on the client: a
    task reads only the columns the plan uses, so it never sees them."""
    names = [str(c) for c in source.columns] if is_dask_frame(source) else source_columns(source)
    return unexpected_column_findings(schema, names, phase)


def _parts(client: Client, source: Any, specs: list[PartitionSpec]) -> list[Any]:
    """A dask DataFrame's partitions as futures computed from its graph (Dask recomputes
    them if a worker is lost); ``None`` per partition for a file source."""
    if not is_dask_frame(source):
        return [None] * len(specs)
    return client.compute(source.to_delayed())


def fit(
    client: Client, plan: LogicalPlan, schema: Schema, source: Source, *,
    backend: str = "auto", rows_per_partition: int = ROWS_PER_PARTITION,
    retry: RetryPolicy | None = None, progress: ProgressArg = False,
    cross_fit: CrossFit | None = None,
) -> tuple[execute.Params, Report]:  # fmt: skip
    """Fitted parameters equal to the single-machine fit's, and the fit's report
    (the passes: :func:`fastprep.runtime.levels.fit_levels`).

    ``progress``: a bar per pass over completed partitions (see
    :mod:`fastprep.runtime.cluster.progress`). ``cross_fit``: a fit_transform's fit, which
    collects the fit rows' out-of-fold encodings (:mod:`fastprep.runtime.cross_fit`)."""
    params, report, _ = fit_with_profile(
        client, plan, schema, source, backend=backend, rows_per_partition=rows_per_partition,
        retry=retry, progress=progress, cross_fit=cross_fit,
    )  # fmt: skip
    return params, report


def fit_with_profile(
    client: Client, plan: LogicalPlan, schema: Schema, source: Source, *,
    backend: str = "auto", rows_per_partition: int = ROWS_PER_PARTITION,
    retry: RetryPolicy | None = None, progress: ProgressArg = False,
    cross_fit: CrossFit | None = None,
) -> tuple[execute.Params, Report, dict[str, Any]]:  # fmt: skip
    """:func:`fit`, and the source's drift profile: each partition's, profiled by the
    first pass's tasks, merged (what a later transform's drift is measured against)."""
    check_fittable(plan)
    undeclared = _undeclared(schema, source, "fit")
    # what the jobs before let go is gone from the workers before this one keeps anything;
    # an earlier fit's partitions no transform took are let go now, not once this fit has
    # kept its own beside them (one fit's per cluster)
    settle(client)
    _release_held(client)
    bars = Progress(progress)
    retry = retry or RetryPolicy()
    specs = partitions_for(client, source, plan, rows_per_partition, retry, bars)
    rows = sum(s.n_rows or 0 for s in specs)
    job = Job(plan, schema, backend, retry, rows)
    frames = _parts(client, source, specs)
    shared = _shared(client, job, keep=True)
    kept = Kept(secrets.token_hex(8), later_chains(plan), whole=_keeps_partitions())
    profiles: list[dict[str, Any]] = []

    def run_pass(learned: Learned, targets: list[Target], stage: str) -> list[dict[str, Any]]:
        first = not profiles  # the first pass profiles each partition (validation's read)
        results = _fit_pass(client, job, specs, learned, targets, stage, frames, bars, shared,
                            kept, profile=first)  # fmt: skip
        if first:
            profiles[:] = [r.pop("profile", None) or {} for r in results] or [{}]
        return results

    try:
        params, report = fit_levels(plan, source, run_pass, rows, cross_fit, undeclared)
    except BaseException:
        kept.drop(client, specs, partitions=True)
        raise
    kept.drop(client, specs, wait=False)
    _hold(client, kept, specs, _held_key(plan, schema, params, source))
    if kept.passes:
        report.notes.append(
            f"passes after the first: {kept.reused} of {kept.passes} partition(s) computed from "
            "the values their worker kept from the first read (not read again)"
        )
    return params, report, drift.merge_profiles([p for p in profiles if p])


@dataclass
class Kept:
    """Where each partition's kept input values are (:mod:`fastprep.runtime.kept_values`):
    partition -> the workers holding them, under the fit's ``token``; ``inputs``: the
    chains the passes after the first need."""

    token: str
    inputs: tuple[tuple[int, str], ...]
    holders: dict[int, list[str]] = field(default_factory=dict)
    passes: int = 0  # partition tasks of the passes after the first
    reused: int = 0  # of which took kept values
    #: the first pass also keeps each whole validated partition for the transform
    #: (``fit_partials(whole=)``); ``partitions``: partition -> the workers holding it
    whole: bool = False
    partitions: dict[int, list[str]] = field(default_factory=dict)
    #: a later pass kept a partition again on another worker (its task was stolen): the
    #: first copy is held by no one the transform asks, so the end of the job drops it
    moved: bool = False

    def key(self, spec: PartitionSpec) -> str:
        return f"{self.token}-{spec.index}"

    def drop(
        self, client: Client, specs: list[PartitionSpec], partitions: bool = False,
        wait: bool = True,
    ) -> None:  # fmt: skip
        """Let the input values go on every worker (a fit that ended, or failed: a task
        that kept values before the failure is not in ``holders``); ``partitions``: the
        whole partitions too (a failed fit, or a transform that ended). One message to
        every worker; ``wait=False``: handed to the client's loop, not waited for (a job
        that ended: nothing it returns depends on it; the next fit settles it first)."""
        keys = [self.key(spec) for spec in specs]
        inputs, whole = bool(self.inputs), partitions and self.whole
        if (inputs or whole) and not wait:
            run_unwaited(client, drop_kept_soon, keys, inputs, whole)
        elif inputs or whole:
            with contextlib.suppress(OSError, KeyError, ValueError):  # gone, values with it
                client.run(drop_kept, keys, inputs, whole, on_error="ignore")
        self.holders.clear()
        if partitions:
            self.partitions.clear()


#: per scheduler, the partitions the last fit kept on its workers for its transform:
#: (what they were kept for, the fit's :class:`Kept`, its partitions)
_HELD: dict[str, tuple[str, Kept, list[PartitionSpec]]] = {}


def _keeps_partitions() -> bool:
    """Whether a fit keeps whole partitions for its transform (a cap of 0 on the client's
    side says no; the workers apply their own)."""
    from fastprep.runtime import kept_values

    return kept_values.PARTITION_BYTES > 0


def _held_key(plan: LogicalPlan, schema: Schema, params: Any, source: Source) -> str:
    """The transform the partitions were kept for: this fitted state over this source."""
    return _token((plan.to_dict(), schema.to_dict(), encode_floats(params), str(source)))


def _release_held(client: Client) -> None:
    """Let go of the partitions an earlier fit kept that no transform took (sent, not
    waited for: its first pass's tasks keep nothing before they end)."""
    earlier = _HELD.pop(client.scheduler.address, None)
    if earlier is not None:
        earlier[1].drop(client, earlier[2], partitions=True, wait=False)


def _hold(client: Client, kept: Kept, specs: list[PartitionSpec], key: str) -> None:
    """Remember where the fit's partitions are for its transform."""
    _release_held(client)  # none: the fit let them go at its start
    if kept.partitions:
        _HELD[client.scheduler.address] = (key, kept, specs)


def _take_held(client: Client, key: str) -> Kept | None:
    """The fit's kept partitions when this transform is the one they were kept for."""
    held = _HELD.get(client.scheduler.address)
    if held is None or held[0] != key:
        return None
    del _HELD[client.scheduler.address]
    return held[1]


def _fit_one(
    work: Any, spec: PartitionSpec, learned: Learned, targets: list[Target], part: Any,
    options: dict[str, Any],
) -> dict[str, Any]:  # fmt: skip
    """A first-pass task (:func:`fit_partials` in the worker's thread budget)."""
    return in_budget(fit_partials, work, spec, learned, targets, part, **options)


def _fit_pass(
    client: Client, job: Job, specs: list[PartitionSpec], learned: Learned,
    targets: list[Target], stage: str, frames: list[Any], progress: Progress | None = None,
    shared: Any = None, kept: Kept | None = None, profile: bool = False,
) -> list[dict[str, Any]]:  # fmt: skip
    """One pass. The first pass is a task per partition, and keeps the input values the
    later passes need on the worker that ran each task (``kept``). A later pass is one
    task per worker holding kept values, sent to that worker, which computes the
    statistics of all its partitions from them instead of reading them again (a task
    that lands elsewhere reads them: slower, the same partials); a partition nobody
    holds is a reading task of its own."""
    kept = kept or Kept("", ())
    token = _token((job.plan.to_dict(), encode_floats(learned_list(learned)), targets))
    work = job if shared is None else shared
    keeps = bool(kept.inputs or kept.whole)
    groups: list[list[int]] = []  # per future, the positions in ``specs`` it computes
    by_worker: dict[str, list[int]] = {}
    keys: list[str] = []
    options: list[dict[str, Any]] = []
    for i in submission_order(specs):
        spec, part = specs[i], frames[i]
        holders = kept.holders.get(spec.index)
        if holders and part is None:
            by_worker.setdefault(holders[0], []).append(i)
            continue
        key = f"fastprep-fit-{token}-{_token(spec)}"
        option: dict[str, Any] = {"profile": True} if profile else {}
        if keeps and part is None:  # a dask DataFrame's: not kept
            option |= {"keep_as": kept.key(spec), "inputs": kept.inputs}
            if kept.whole:
                option["whole"] = kept.token
            # the fit's token in the key: an identical earlier fit's result, still in the
            # cluster's memory, would be returned without running (and keeping) anything
            key = f"fastprep-fit-{token}-{kept.token}-{_token(spec)}"
        keys.append(key)
        options.append(option)
        groups.append([i])
    futures: list[Future] = []
    if groups:
        # the reading tasks in one graph (one message, one update of the scheduler's
        # state, where a submit each was one each): the scheduler orders a graph's tasks
        # by their position in it, largest first as listed (submission_order)
        n = len(groups)
        futures = client.map(
            _fit_one, [work] * n, [specs[g[0]] for g in groups], [learned] * n,
            [targets] * n, [frames[g[0]] for g in groups], options, key=keys,
            priority=largest_first(specs[groups[0][0]]),
            # the keys are given: pure=True would still tokenize every argument (the
            # plan, the learned state) of every task, 12-54 ms a pass measured
            pure=False,
        )  # fmt: skip
    for worker, positions in by_worker.items():
        # one task for all of a worker's partitions: computing one from its kept values
        # takes a few ms, about what the scheduler spends on a task and its result
        held = [specs[i] for i in positions]
        # its own key prefix: Dask learns these tasks' (short) duration apart from a
        # reading pass's, and does not steal them from their worker as if long
        key = f"fastprep-kept-{token}-{kept.token}-{_token([_token(s) for s in held])}"
        futures.append(client.submit(
            in_budget, fit_partials_kept, work, held, learned, targets, [kept.key(s) for s in held],
            inputs=kept.inputs, whole=kept.token if kept.whole else None, key=key,
            workers=[worker], allow_other_workers=True,
            priority=sum(largest_first(s) for s in held),
        ))  # fmt: skip
        groups.append(positions)
    answers = _results(client, futures, [[specs[i] for i in g] for g in groups], stage,
                       progress)  # fmt: skip
    results: list[dict[str, Any]] = [{}] * len(specs)
    source: list[Future] = [futures[0]] * len(specs) if futures else []
    for future, positions, answer in zip(futures, groups, answers):
        for i, result in zip(positions, answer if isinstance(answer, list) else [answer]):
            results[i], source[i] = result, future
    if kept.holders:
        kept.passes += len(results)
        kept.reused += sum(bool(r.get("reused")) for r in results)
    whole = {s.index for s, r in zip(specs, results) if r.pop("whole", False)}
    ran_on = [r.pop("worker", None) for r in results]  # each task says where it ran
    held_at = [(s, f, w) for s, f, r, w in zip(specs, source, results, ran_on)
               if r.pop("kept", False) or r.get("reused") or s.index in whole]  # fmt: skip
    unsaid = [f for _, f, w in held_at if w is None]
    who = client.who_has(list({f.key: f for f in unsaid}.values())) if unsaid else {}
    for spec, future, worker in held_at:
        holders = [worker] if worker is not None else list(who.get(future.key, ()))
        if holders:
            kept.holders[spec.index] = holders
            if spec.index in whole:
                earlier = kept.partitions.get(spec.index)
                kept.moved |= earlier is not None and earlier != holders
                kept.partitions[spec.index] = holders
    return results


def transform(
    client: Client, plan: LogicalPlan, schema: Schema, params: execute.Params, source: Source,
    *, output_dir: str | None = None, backend: str = "auto", out_dtype: str = "float32",
    rows_per_partition: int = ROWS_PER_PARTITION, retry: RetryPolicy | None = None,
    partitions: list[PartitionSpec] | None = None, progress: ProgressArg = False,
    compress: str | bool | None = None, pipeline: Any = None, cross_fit: CrossFit | None = None,
    profile: dict[str, Any] | None = None, drift_thresholds: dict[str, float] | None = None,
) -> execute.Output | shards.Manifest:  # fmt: skip
    """Transform every partition; gather one :class:`Output`, or write shards to ``output_dir``.

    With ``output_dir``, partitions whose shard record (same fitted state and partition)
    is already there are skipped: a re-run after a crash resumes where it stopped; the
    folder is the output format ``fp.open_output`` reads (``compress="zstd"|"lz4"``
    compresses its arrays; ``pipeline``, a fitted pipeline, is published with them).
    ``progress``: a bar over completed partitions (skipped ones count as done).
    ``cross_fit``: the source is the fit's own (a fit_transform): each task gets its rows'
    folds and the out-of-fold encodings. ``profile``: the fit's drift profile: each
    partition is measured against it and the merged measures are the report's ``drift``,
    as an in-memory transform's (``drift_thresholds`` as there).
    """
    codec = check_codec(compress)
    undeclared = _undeclared(schema, source, "transform")
    retry = retry or RetryPolicy()
    bars = Progress(progress)
    specs = partitions or partitions_for(client, source, plan, rows_per_partition, retry,
                                         bars, reuse=True)  # fmt: skip
    job = Job(plan, schema, backend, retry, sum(s.n_rows or 0 for s in specs))
    fitted: Any = (plan.to_dict(), encode_floats(params), out_dtype)
    if getattr(schema, "tables", None):  # a refit side table changes the output too
        fitted += tuple(t.digest() for _, t in sorted(schema.tables.items()))
    if cross_fit is not None:  # the fit's own rows, out of fold: another output
        fitted += ("cross-fitted",)
    fingerprint = _token(fitted)
    names = make_layout(plan, params).names(plan, params)
    # the client claims the folder for the whole job: its tasks' files are never taken
    # for a killed writer's leftovers by another writer's publish
    claim = Writing(Path(output_dir)) if output_dir is not None else None
    held: Kept | None = None
    taken = 0
    try:
        done: dict[int, dict[str, Any]] = {}
        if output_dir is not None:
            done = shards.completed(Path(output_dir), specs, fingerprint)
        frames = dict(zip([s.index for s in specs], _parts(client, source, specs)))
        todo = [specs[i] for i in submission_order(specs) if specs[i].index not in done]
        held = _take_held(client, _held_key(plan, schema, params, source))
        shared = _shared(client, job) if todo else job
        # the per-fold encodings once to every worker; each task gets its rows' folds
        tables = None
        if cross_fit is not None and todo:
            # in a list: one future of a fresh key (a dict's keys would name the futures)
            [tables] = client.scatter([cross_fit.tables], broadcast=True, hash=False)
        where = _token([output_dir, codec])
        by_worker = _by_holder(held, todo, frames, output_dir is not None and cross_fit is None)
        batched = {s.index for group in by_worker.values() for s in group}
        alone = [s for s in todo if s.index not in batched]
        futures = [
            client.submit(
                in_budget,
                transform_partition,
                shared,
                spec,
                params,
                fingerprint,
                output_dir,
                out_dtype,
                frames[spec.index],
                codec,
                profile=profile,
                folded=None if cross_fit is None else (cross_fit.folds_of(spec.index), tables),
                key=f"fastprep-transform-{fingerprint}-{where}-{_token(spec)}",
                priority=largest_first(spec),
                **_kept_for(held, spec),
            )
            for spec in alone
        ]
        groups: list[Any] = list(alone)
        for worker, group in by_worker.items():  # one task for a worker's kept partitions
            assert held is not None
            futures.append(client.submit(
                in_budget, transform_partitions, shared, group, params, fingerprint, output_dir,
                out_dtype, codec, [held.key(s) for s in group], profile=profile,
                key=f"fastprep-transform-kept-{fingerprint}-{where}-{_token([_token(s) for s in group])}",
                workers=[worker], allow_other_workers=True,
                priority=sum(largest_first(s) for s in group),
            ))  # fmt: skip
            groups.append(group)
        answers = _results(client, futures, groups, "transform", bars, total=len(specs))
        results = [r for a in answers for r in (a if isinstance(a, list) else [a])]
        reruns = _reruns(client, futures)
        entries = {r["entry"]["index"]: r["entry"] for r in results} | done
        notes = _job_notes(results, reruns, len(done))
        taken = sum(bool(r.get("reused")) for r in results)
        if held is not None and results:
            spilled = sum(bool(r.get("spilled")) for r in results)
            notes.append(f"{taken} of {len(results)} partition(s) transformed from the rows "
                         f"their worker kept from the fit ({taken - spilled} in memory, "
                         f"{spilled} on disk; not read or validated again)")  # fmt: skip
        if output_dir is not None:
            return shards.write_manifest(Path(output_dir), specs, entries, names, notes, str(source),
                                         fingerprint, out_dtype=out_dtype, codec=codec,
                                         pipeline=pipeline, writing=claim,
                                         whole_source=undeclared,
                                         drift_against=(profile, drift_thresholds))  # fmt: skip
        output = _gather(results, names, notes, str(source), undeclared)
        shards.add_drift(output.report, profile, [r["entry"].get("drift") for r in results],
                         drift_thresholds)  # fmt: skip
        return output
    finally:
        # those no task took (a task run elsewhere, a skipped one, a failed job, a copy
        # left where a stolen task first kept it): none when every partition held was
        # transformed from what its worker kept
        if held is not None and (taken < len(held.partitions) or held.moved):
            held.drop(client, specs, partitions=True, wait=False)
        if claim is not None:
            claim.release()


def _by_holder(
    held: Kept | None, todo: list[PartitionSpec], frames: dict[int, Any], batch: bool
) -> dict[str, list[PartitionSpec]]:
    """The partitions of ``todo`` the fit kept, by the worker holding them (``batch``: a
    transform writing shards; a gathered one returns each partition's output as its
    own task ends, so that a worker never holds all of its outputs at once)."""
    out: dict[str, list[PartitionSpec]] = {}
    if held is None or not batch:
        return out
    for spec in todo:
        holders = held.partitions.get(spec.index)
        if holders and frames.get(spec.index) is None:
            out.setdefault(holders[0], []).append(spec)
    return out


def _kept_for(held: Kept | None, spec: PartitionSpec) -> dict[str, Any]:
    """A transform task's options when the fit kept its partition on a worker: the key to
    take it by, and that worker (another may still run it: it then reads the partition)."""
    if held is None or spec.index not in held.partitions:
        return {}
    return {"reuse": held.key(spec), "workers": held.partitions[spec.index],
            "allow_other_workers": True}  # fmt: skip


def _shared(client: Client, job: Job, keep: bool = False) -> Any:
    """The job as its tasks get it: with fitted lookup tables, scattered once to every
    worker (``broadcast``), not serialized into each task; a worker that joins later
    fetches it from the others. ``keep`` (a fit): also left on the cluster for the
    transform after it, which takes it instead of scattering the same tables again (an
    equal job: same plan, tables, backend; else it scatters its own)."""
    tables = getattr(job.schema, "tables", None)
    if not tables:
        return job
    address = client.scheduler.address
    token = _token((job.plan.to_dict(), job.schema.to_dict(),
                    [t.digest() for _, t in sorted(tables.items())],
                    job.backend, repr(job.retry), job.rows))  # fmt: skip
    earlier = _SCATTERED.pop(address, None)
    if earlier is not None and earlier[0] == token and earlier[1].status == "finished":
        shared = earlier[1]
    else:
        shared = client.scatter(job, broadcast=True, hash=False)
    if keep:
        _SCATTERED[address] = (token, shared)
    return shared


#: per scheduler, the job (with its lookup tables) the last fit scattered, for the
#: transform after it: (what it is, its future); one per cluster, let go when taken
_SCATTERED: dict[str, tuple[str, Future]] = {}


def _gather(
    results: list[dict[str, Any]],
    names: Any,
    notes: list[str],
    source: str,
    whole_source: list[Finding],
) -> execute.Output:
    import scipy.sparse as sp

    outputs = [r["output"] for r in sorted(results, key=lambda r: r["entry"]["index"])]
    X = (
        sp.vstack([o.X for o in outputs], format="csr")
        if sp.issparse(outputs[0].X)
        else np.concatenate([o.X for o in outputs])
    )
    ys = [o.y for o in outputs]
    y = None if any(v is None for v in ys) else np.concatenate(ys)
    report = shards.combine_reports(
        [o.report.to_dict() for o in outputs], notes, source, whole_source
    )
    rejected = [o.quarantine_to_write() for o in outputs]  # as read: Arrow for files
    quarantine = concat_rejected([r() if callable(r) else r for r in rejected])
    row_ids = np.concatenate([o.row_ids for o in outputs])
    report.output = execute.describe_output(X)
    return execute.Output(X, y, names, report, quarantine, row_ids)


def _job_notes(results: list[dict[str, Any]], reruns: dict[str, int], resumed: int) -> list[str]:
    notes = []
    retries = sum(r["entry"]["retries"] for r in results)
    if retries:
        notes.append(f"{retries} transient read error(s) retried")
    if reruns:
        notes.append(
            f"{len(reruns)} partition task(s) re-run after a worker was lost "
            f"({sum(reruns.values())} extra run(s)); output is unchanged"
        )
    if resumed:
        notes.append(f"resumed: {resumed} partition(s) already written were skipped")
    return notes


def _results(
    client: Client, futures: list[Future], specs: list[PartitionSpec] | list[list[PartitionSpec]],
    stage: str, progress: Progress | None = None, total: int | None = None,
) -> list[Any]:  # fmt: skip
    """Wait for every task; the first failure stops the job, naming its partition.
    ``specs``: per task its partition, or the partitions it computes (a list).

    Progress ticks once per completed partition (``total`` less the partitions of
    ``specs``, those a resumed job skips, count as done from the start)."""
    groups = [s if isinstance(s, list) else [s] for s in specs]
    count = sum(len(g) for g in groups)
    total = count if total is None else total
    tracker = (progress or Progress()).stage(stage, total, total - count)
    try:
        return _wait(client, futures, groups, stage, tracker)
    finally:
        tracker.close()


def _wait(
    client: Client, futures: list[Future], groups: list[list[PartitionSpec]], stage: str,
    tracker: Any,
) -> list[Any]:  # fmt: skip
    by_key = {f.key: g for f, g in zip(futures, groups)}
    results: dict[Any, Any] = {}
    # each result fetched as its task ends, while the others run: when the last one ends
    # only its own is still to fetch before the client merges and submits the next pass.
    # The job's client's loop: without it Dask takes the default client's, and a client
    # made with set_as_default=False (or another client made after it) has none or another
    done = as_completed(futures, loop=client.loop, with_results=True, raise_errors=False)
    for future, result in done:
        if future.status == "finished":
            results[future.key] = result
            for _ in by_key[future.key]:
                tracker.tick()
            continue
        what = _describe(by_key[future.key])
        path = by_key[future.key][0].path
        if future.status != "error":  # cancelled from outside the job
            client.cancel(futures)
            raise JobError(f"{stage}: {what} was cancelled ({future.status})")
        exc = future.exception()
        client.cancel(futures)
        if isinstance(exc, KilledWorker):
            raise JobError(
                f"{stage}: {what} of source {path!r} killed every worker "
                f"that ran it ({exc}); fix or remove that partition, then re-run (written "
                "partitions are kept and skipped)"
            ) from exc
        if isinstance(exc, PartitionFailed):
            raise JobError(f"{stage}: {exc}") from exc
        if isinstance(exc, FastprepError):
            raise exc
        raise JobError(f"{stage}: {what} failed: {type(exc).__name__}: {exc}") from exc
    return [results[f.key] for f in futures]


def _describe(specs: list[PartitionSpec]) -> str:
    """The partition a task computes, or the task's partitions (one task for several)."""
    if len(specs) == 1:
        return specs[0].describe()
    return "the task of " + ", ".join(s.describe() for s in specs)


def _processing_counts(dask_scheduler: Any, keys: list[str]) -> dict[str, int]:
    """On the scheduler: how many times each task was sent to a worker since the client
    last submitted it (transition log entries: key, start, finish, recommendations,
    stimulus, time; a submission is ``released -> waiting`` by an ``update-graph``
    stimulus, a re-run after a lost worker the same transition by another). Counted from
    the log rather than from a time taken on the scheduler before the job: that was one
    more round trip to the scheduler per job, and the client's clock is not the
    scheduler's."""
    out = {}
    for key in keys:
        runs = 0
        for event in dask_scheduler.story(key):
            if event[0] != key:
                continue
            submitted = str(event[4]).startswith("update-graph")
            if tuple(event[1:3]) == ("released", "waiting") and submitted:
                runs = 0
            elif event[2] == "processing":
                runs += 1
        out[key] = runs
    return out


def _reruns(client: Client, futures: list[Future]) -> dict[str, int]:
    """Tasks that ran more than once (a worker died holding or running them): one round
    trip to the scheduler, after the tasks."""
    if not futures:
        return {}
    keys = [f.key for f in futures]
    counts = client.run_on_scheduler(_processing_counts, keys=keys)
    return {k: n - 1 for k, n in counts.items() if n > 1}


def _token(value: Any) -> str:
    data = json.dumps(value, sort_keys=True, default=repr).encode()
    return hashlib.sha1(data).hexdigest()[:16]

"""Write the results three ways: a Markdown table, a JSON file, a PNG plot.

Ratios are speed-ups (how many times faster than naive / idiomatic pandas: > 1 is faster)
and the roofline multiple (how many times the bandwidth bound a run takes: ≥ 1).
A naive time measured on a sample is scaled per row to the full size and says so.

Memory comes two ways. *Peak RSS* is the cold run's: it includes one-time costs (kernels
loaded or compiled, first imports). *Working MiB (kernels loaded)* is measured after those
(see :mod:`fastprep.bench.harness`, step 4), and is what the memory target is judged
on: peak ≤ input columns + output matrix + 10%, i.e. working memory (above the loaded
input) ≤ output + 10% of (input + output).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from fastprep.bench.impls import IDIOMATIC, NAIVE

#: the memory target: peak memory no more than the input columns + the output matrix + 10%
TARGET_SLACK = 0.10


def summarize(size: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per implementation: medians, min–max, memory, ratios and the gate, ready to print."""
    out: dict[str, dict[str, Any]] = {}
    for name, entry in size["impls"].items():
        scale = size["rows_emitted"] / entry["rows_measured"] if entry["rows_measured"] else 1.0
        row: dict[str, Any] = {"label": entry["label"], "gate": entry["gate"], "scale": scale,
                               "extrapolated": entry["extrapolated"],
                               "errors": len(entry.get("worker_errors", []))}  # fmt: skip
        if entry.get("warm_s"):
            warm = [t * scale for t in entry["warm_s"]]
            row.update(
                median=statistics.median(warm),
                min=min(warm),
                max=max(warm),
                cold=statistics.median(t * scale for t in entry["cold_s"]),
                peak_mib=statistics.median(entry["peak_rss_mib"]),
                delta_mib=statistics.median(
                    p - b for p, b in zip(entry["peak_rss_mib"], entry["baseline_rss_mib"])
                ),
            )
            row["x_roofline"] = row["median"] / size["roofline_s"]
        if entry.get("working_mib"):
            row["working_mib"] = statistics.median(entry["working_mib"])
        out[name] = row
    for name, base in ((NAIVE, "vs_naive"), (IDIOMATIC, "vs_pandas")):
        reference = out.get(name, {}).get("median")
        for row in out.values():
            if reference and row.get("median"):
                row[base] = reference / row["median"]
    return out


def _fmt(value: float | None, spec: str = "", suffix: str = "") -> str:
    """Numbers for the table; seconds (no ``spec``) get three significant digits."""
    if value is None:
        return "—"
    if not spec:
        spec = ",.0f" if value >= 100 else ".3g"
    return f"{value:{spec}}{suffix}"


def _gate_text(gate: dict[str, Any], errors: int = 0) -> str:
    if gate["ok"] and errors:
        return f"OK, but {errors} worker run(s) failed (see JSON worker_errors)"
    if gate["ok"]:
        return f"OK (max abs diff {gate['max_abs_diff']:.1e})"
    diff = "" if gate["max_abs_diff"] is None else f", max abs diff {gate['max_abs_diff']:.3g}"
    detail = str(gate["detail"]).replace("|", "/")
    if detail.startswith(("UNSUPPORTED", "ERROR")):
        return detail
    return f"**WRONG** ({detail}{diff}): not timed"


def size_table(size: dict[str, Any]) -> str:
    """The Markdown table of one size."""
    out = size["output"]
    lines = [
        f"### {size['rows']:,} rows ({size['rows_emitted']:,} emitted, "
        f"{size['rows_quarantined']:,} quarantined by fastprep and withheld from all)",
        "",
        f"X: {' × '.join(f'{d:,}' for d in out['shape'])} {out['layout']}, nnz {out['nnz']:,}; "
        f"roofline (read {size['input_bytes'] / 2**20:,.1f} MiB of input + write "
        f"{size['output_bytes'] / 2**20:,.1f} MiB of output once): {size['roofline_s']:.3g} s",
        "",
        "| implementation | median s (warm) | min–max s | cold median s "
        "| cold peak RSS MiB (+ over input) | working MiB (kernels loaded) "
        "| × faster than naive | × faster than pandas | × roofline | correctness |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    rows = summarize(size)
    for row in rows.values():
        label = row["label"]
        if row["extrapolated"] and "median" in row:
            label += f" — *extrapolated from {size['rows_emitted'] / row['scale']:,.0f} rows*"
        spread = f"{_fmt(row.get('min'))}–{_fmt(row.get('max'))}" if "min" in row else "—"
        peak = f"{_fmt(row.get('peak_mib'), ',.0f')} (+{_fmt(row.get('delta_mib'), ',.0f')})"
        peak += " (sample)" if row["extrapolated"] else ""
        lines.append(
            f"| {label} | {_fmt(row.get('median'))} | {spread} | {_fmt(row.get('cold'))} "
            f"| {peak if 'peak_mib' in row else '—'} | {_fmt(row.get('working_mib'), ',.1f')} "
            f"| {_fmt(row.get('vs_naive'), ',.1f', '×')} "
            f"| {_fmt(row.get('vs_pandas'), ',.2f', '×')} | {_fmt(row.get('x_roofline'), ',.0f', '×')} "
            f"| {_gate_text(row['gate'], row['errors'])} |"
        )
    lines += ["", memory_target(size, rows)]
    return "\n".join(lines)


def memory_target(size: dict[str, Any], rows: dict[str, dict[str, Any]] | None = None) -> str:
    """One line: the memory target at this size and each fastprep variant against it."""
    rows = summarize(size) if rows is None else rows
    mib_in, mib_out = size["input_bytes"] / 2**20, size["output_bytes"] / 2**20
    allowed = mib_out + TARGET_SLACK * (mib_in + mib_out)
    verdicts = []
    for name, row in rows.items():
        if not name.startswith("fastprep["):
            continue
        working = row.get("working_mib")
        if working is None:
            verdict = "not measured" if row["gate"]["ok"] else "not measured (gate failed)"
        elif working <= allowed:
            verdict = f"{working:,.1f} MiB, within"
        else:
            verdict = f"{working:,.1f} MiB, **over by {working - allowed:,.1f} MiB**"
        verdicts.append(f"{row['label']}: {verdict}")
    return (
        f"Memory target (set for the numeric part: peak ≤ input "
        f"columns + output + {TARGET_SLACK:.0%}, one-time kernel loading excluded): input {mib_in:,.1f} MiB, output {mib_out:,.1f} MiB (X + y as "
        f"emitted) → allowed working memory = output + {TARGET_SLACK:.0%} of (input + output) = "
        f"{allowed:,.1f} MiB; {'; '.join(verdicts) or 'no fastprep variant run'}."
    )


def markdown(results: dict[str, Any]) -> str:
    """The full Markdown report: command, machine, method notes, one table per size."""
    m = results["machine"]
    versions = ", ".join(f"{k} {v}" for k, v in m["versions"].items() if v)
    bandwidth = results["bandwidth"]["bytes_per_s"] / 1e9
    method = next(
        (e.get("memory_method") for s in results["sizes"] for e in s["impls"].values()
         if e.get("memory_method")), "n/a",
    )  # fmt: skip
    inline = results.get("isolation", "process") != "process"
    where = "inline: smoke run only" if inline else "a fresh process"
    parts = [
        f"Command: `{results['command']}`",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB, {m['os']}; "
        f"Python {m['python']}; {versions}; {m['date']}.",
        f"Copy bandwidth: {bandwidth:.1f} GB/s ({results['bandwidth']['method']}).",
        "",
        f"Rows: {results['rows_note']}",
        f"Timing: {results['config']['repeat']} round(s), implementations alternating "
        "(round-robin); each sample is "
        + (
            "a fresh process"
            if results.get("isolation", "process") == "process"
            else "**in the harness process (inline: smoke run only)**"
        )
        + ": *cold* = its first fit + transform, "
        "*warm* = the second, straight after. Cold peak RSS = the cold run's high-water mark "
        f"({method}), median over rounds; it includes the interpreter, the libraries and the "
        "loaded input, and (+N) is the part above the RSS just before the run — which "
        "includes one-time kernel loading/compilation and first imports.",
        f"Working MiB (kernels loaded): in each round, every implementation timed on all the "
        f"rows gets one more sample ({where}) that runs fit + transform untimed on "
        f"{_warmup_rows(results)} (kernels loaded or compiled, imports done), releases what "
        "it retained (fastprep.release_memory(): arena, cached row ids, free heap "
        "pages), then runs once more: that run's peak RSS minus the RSS just before it "
        "(input loaded), median over rounds. Not a timing sample; the memory target "
        "is judged on it (the line under each table).",
    ]
    for size in results["sizes"]:
        parts += ["", size_table(size)]
    return "\n".join(parts) + "\n"


def write_png(results: dict[str, Any], path: Path) -> None:
    """Time vs rows (log-log, roofline dashed) and peak-memory bars, with matplotlib Agg."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_time, ax_mem) = plt.subplots(1, 2, figsize=(14, 5.5))
    sizes = results["sizes"]
    rows = [s["rows_emitted"] for s in sizes]
    tables = [summarize(s) for s in sizes]
    names = list(dict.fromkeys(n for t in tables for n in t))
    for name in names:
        points = [
            (r, t[name]["median"]) for r, t in zip(rows, tables) if "median" in t.get(name, {})
        ]
        if points:
            label = tables[0].get(name, {}).get("label", name)
            extrapolated = any(t.get(name, {}).get("extrapolated") for t in tables)
            style = ":" if extrapolated else "-"
            ax_time.plot(*zip(*points), style, marker="o",
                         label=label + (" (extrapolated)" if extrapolated else ""))  # fmt: skip
    ax_time.plot(
        rows, [s["roofline_s"] for s in sizes], "k--", marker="x", label="memory-bandwidth roofline"
    )
    ax_time.set(xscale="log", yscale="log", xlabel="rows emitted", ylabel="fit + transform, s (warm median)",
                title="Time vs rows")  # fmt: skip
    ax_time.legend(fontsize=7)
    width = 0.8 / max(len(names), 1)
    for i, name in enumerate(names):
        peaks = [t.get(name, {}).get("peak_mib", 0.0) for t in tables]
        ax_mem.bar([j + i * width for j in range(len(sizes))], peaks, width, label=name)
    ax_mem.set_xticks([j + 0.4 - width / 2 for j in range(len(sizes))], [f"{r:,}" for r in rows])
    ax_mem.set(xlabel="rows emitted", ylabel="peak RSS, MiB (cold run)", title="Peak memory")
    ax_mem.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_all(results: dict[str, Any], folder: str | Path) -> dict[str, Path]:
    """``results.md``, ``results.json``, ``results.png`` in ``folder``."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"md": out / "results.md", "json": out / "results.json", "png": out / "results.png"}
    paths["md"].write_text(markdown(results))
    paths["json"].write_text(json.dumps(results, indent=1, default=str))
    write_png(results, paths["png"])
    return paths


def _warmup_rows(results: dict[str, Any]) -> str:
    rows = results["config"].get("warmup_rows")
    return "the same rows" if rows is None else f"the first {rows:,} rows"

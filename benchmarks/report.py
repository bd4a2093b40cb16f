"""Terminal table, JSON results file and PNG chart of one benchmark invocation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _fmt_rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def terminal_table(results: dict[str, Any]) -> str:
    lines = []
    header = (
        f"{'system':<17} {'path':<22} {'source':<7} {'shape':<6} {'target':<5} {'rows':>9} "
        f"{'rows/s':>10} {'e2e rows/s':>10} {'run s':>7} {'cpu s':>7} {'rss MB':>7}"
    )
    lines += [header, "-" * len(header)]
    for m in results["transfers"]:
        med = m["median"]
        lines.append(
            f"{m['system']:<17} {m['path']:<22} {m['source']:<7} {m['shape']:<6} {m['target']:<5} "
            f"{med.get('rows') or 0:>9,} {_fmt_rate(med.get('rows_per_s')):>10} "
            f"{_fmt_rate(med.get('rows_per_s_e2e')):>10} {_fmt(med.get('seconds')):>7} "
            f"{_fmt(med.get('cpu_s')):>7} {_fmt(med.get('max_rss_mb'), 0):>7}"
        )
    lines.append("")
    for store, by_count in results.get("guard", {}).items():
        parts = ", ".join(f"{n}: {v['ms_per_partition']:.2f} ms" for n, v in by_count.items())
        lines.append(f"guard arm+promote per partition ({store}): {parts}")
    reader = results.get("reader") or {}
    for interface, value in reader.items():
        lines.append(
            f"reader observe ({interface}, {value.get('rows', 0):,} rows, start-up included): "
            f"{_fmt(value.get('seconds'))} s ({value.get('outcome')})"
        )
    memory = results.get("memory") or {}
    for label, by_rows in memory.items():
        sizes = " -> ".join(f"{int(rows):,} rows {_fmt(mb, 0)} MB" for rows, mb in by_rows.items())
        lines.append(f"peak RSS dpone {label}: {sizes}")
    lines.append("")
    for target in results.get("targets", []):
        verdict = {True: "met", False: "MISSED", None: "n/a"}[target["met"]]
        lines.append(f"[{verdict:>6}] {target['name']}: {target['measured']} (target {target['target']})")
    return "\n".join(lines)


def write_json(results: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")


def write_chart(results: dict[str, Any], path: Path) -> str | None:
    """rows/s per system and path (orders and wide), and guard ms/partition per partition count."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install -e '.[bench]'); no chart written"

    main_rows = {"orders": results["config"]["rows"], "wide": results["config"]["wide_rows"]}
    transfers = [
        m
        for m in results["transfers"]
        # the orders and wide shapes at their main size: not the RSS runs, not the SQL Server systems
        if m["median"].get("rows_per_s")
        and m["shape"] in main_rows
        and f"_{main_rows[m['shape']]}_" in m["label"]
    ]
    shapes = [s for s in ("orders", "wide") if any(m["shape"] == s for m in transfers)]
    fig, axes = plt.subplots(1, len(shapes) + 1, figsize=(7 * len(shapes) + 6, 7), squeeze=False)
    colors = {
        "dpone": "#1f77b4",
        "raw pipe": "#7f7f7f",
        "hand-written": "#ff7f0e",
        "GenericTransfer": "#d62728",
    }
    for ax, shape in zip(axes[0], shapes, strict=False):
        chosen = [m for m in transfers if m["shape"] == shape]
        labels = [
            f"{m['system']}\n{m['path']}\n{m['source']} -> {m['target']} ({m['median']['rows']:,} rows)"
            for m in chosen
        ]
        values = [m["median"]["rows_per_s"] for m in chosen]
        bars = ax.barh(range(len(chosen)), values, color=[colors.get(m["system"], "#2ca02c") for m in chosen])
        ax.set_yticks(range(len(chosen)), labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlabel("rows/s (median, log scale)")
        ax.set_title(f"{shape}: rows/s per system and path (median, in-process)")
        for bar, value in zip(bars, values, strict=True):
            ax.text(value, bar.get_y() + bar.get_height() / 2, f" {value:,.0f}", va="center", fontsize=7)
    guard_ax = axes[0][-1]
    for store, by_count in results.get("guard", {}).items():
        counts = sorted(int(n) for n in by_count)
        guard_ax.plot(
            counts, [by_count[str(n)]["ms_per_partition"] for n in counts], marker="o", label=f"{store} store"
        )
    guard_ax.set_xscale("log")
    guard_ax.set_xlabel("partitions in the checkpoint batch")
    guard_ax.set_ylabel("ms per partition (arm + committed promotion)")
    guard_ax.set_title("guard overhead per partition")
    guard_ax.axhline(5, color="#1f77b4", linestyle=":", linewidth=1, label="target SQLite (5 ms)")
    guard_ax.axhline(10, color="#ff7f0e", linestyle=":", linewidth=1, label="target PostgreSQL (10 ms)")
    guard_ax.set_ylim(bottom=0)
    guard_ax.legend(fontsize=8)
    fig.suptitle(results.get("title", "dpone benchmark"), fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None

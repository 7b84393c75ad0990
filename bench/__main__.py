"""Run every ``bench/bench_*.py`` module, print one table and write ``bench/results/latest.json``.

Each module defines ``async def run() -> list[dict]`` whose rows are
``{"benchmark", "metric", "value", "unit"}`` plus optional ``"baseline"`` (the same metric for a reference
measured in the same run) and ``"note"``; a ratio is printed when a baseline is given, because the machine is
noisy and only same-run comparisons mean something. ``python -m bench NAME...`` runs the named modules only.
"""

from __future__ import annotations

import importlib
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).parent


def _modules(selected: list[str]) -> list[str]:
    names = sorted(p.stem for p in HERE.glob("bench_*.py"))
    if selected:
        names = [n for n in names if n in selected or n.removeprefix("bench_") in selected]
    return names


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.0f}"
    return str(value)


async def _main(selected: list[str]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for name in _modules(selected):
        started = time.perf_counter()
        try:
            module = importlib.import_module(f"bench.{name}")
            got = await module.run()
        except Exception as exc:  # one broken benchmark must not hide the others' figures
            print(f"# {name}: FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
            rows.append(
                {"module": name, "benchmark": name, "metric": "FAILED", "value": 0, "unit": "", "note": str(exc)[:200]}
            )
            continue
        for row in got:
            row.setdefault("module", name)
            if row.get("baseline"):
                row["ratio"] = row["value"] / row["baseline"]
        rows.extend(got)
        print(f"# {name}: {len(got)} figures in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return rows


def main() -> int:
    rows = anyio.run(_main, sys.argv[1:])
    header = ["benchmark", "metric", "value", "unit", "baseline", "ratio", "note"]
    table = [[_fmt(r.get(h, "")) for h in header] for r in rows]
    widths = [max(len(h), *(len(t[i]) for t in table)) if table else len(h) for i, h in enumerate(header)]
    for line in [header, *table]:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    meta = {"python": sys.version.split()[0], "machine": platform.machine(), "time": time.time()}
    (out / "latest.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    print(f"# wrote {out / 'latest.json'}", file=sys.stderr)
    return 1 if any(r["metric"] == "FAILED" for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())

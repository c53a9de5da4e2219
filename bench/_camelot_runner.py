"""Run camelot on PDFs for bench/tables.py, in camelot's own virtual environment (bench/requirements-camelot.txt):
one JSON line per (file, flavor) on stdout with each table's page, bounding box (PDF points, origin at the bottom
left, as camelot gives it) and cell texts.

    bench/.venv-camelot/bin/python bench/_camelot_runner.py FLAVOR FILE...
"""

from __future__ import annotations

import json
import sys
import time
import warnings


def main() -> None:
    import camelot

    flavor, files = sys.argv[1], sys.argv[2:]
    warnings.simplefilter("ignore")
    for path in files:
        started = time.perf_counter()
        out: dict[str, object] = {"file": path, "flavor": flavor}
        try:
            tables = camelot.read_pdf(path, pages="all", flavor=flavor)
            out["tables"] = [{"page": int(t.page), "bbox": [float(v) for v in t._bbox] if t._bbox else None,
                              "grid": [[str(c) for c in row] for row in t.df.values.tolist()]} for t in tables]
        except Exception as exc:  # a file camelot cannot read counts as no tables, with the reason
            out["tables"], out["error"] = [], f"{type(exc).__name__}: {exc}"[:300]
        out["seconds"] = round(time.perf_counter() - started, 3)
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()

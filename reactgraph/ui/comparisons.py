"""`reactgraph compare` results for the debugger page: the comparisons in the folder `reactgraph ui --results DIR`
names, each as its summary (the tables, with their intervals) and its plots.

These are data, so they are routes of the API (`/comparisons…`), behind the service's auth like every other
read, not files of the page's open folder. The folder is the operator's, its files are still read with bounds:
only the folder itself and its direct subfolders that hold a `summary.json` are comparisons, a name is one path
segment of safe characters that must resolve inside the folder, a summary is read up to 4 MB and a plot up to
8 MB, and only `summary.json` and `*.png` are served.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from reactgraph.service.api_common import error_response

SUMMARY = "summary.json"
HERE = "."  # the folder itself, when it is one comparison's output
MAX_COMPARISONS = 200
MAX_SUMMARY_BYTES = 4 * 1024 * 1024
MAX_PLOT_BYTES = 8 * 1024 * 1024
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")


class Comparisons:
    """The comparisons of one results folder (None: the page was started without one)."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder.resolve() if folder is not None else None

    def listed(self) -> list[dict[str, Any]]:
        """Each comparison's name and what it compared, newest first."""
        if self.folder is None or not self.folder.is_dir():
            return []
        found = [HERE] if (self.folder / SUMMARY).is_file() else []
        found += sorted(p.name for p in self.folder.iterdir() if p.is_dir() and _NAME.match(p.name)
                        and (p / SUMMARY).is_file())[:MAX_COMPARISONS]
        rows = [row for name in found if (row := self._row(name)) is not None]
        return sorted(rows, key=lambda row: str(row.get("started_at") or ""), reverse=True)

    def _row(self, name: str) -> dict[str, Any] | None:
        summary = self.summary(name)
        if summary is None:
            return None
        config = summary.get("config")
        config = config if isinstance(config, dict) else {}
        folder = self._dir(name)
        plots = sorted(p.name for p in folder.glob("*.png") if _NAME.match(p.name)) if folder is not None else []
        return {"name": name, "started_at": config.get("started_at"), "suite": config.get("suite"),
                "graphs": list(summary.get("graphs") or {}), "models": summary.get("models") or [], "plots": plots}

    def _dir(self, name: str) -> Path | None:
        if self.folder is None or (name != HERE and not _NAME.match(name)):
            return None
        path = (self.folder / name).resolve() if name != HERE else self.folder
        return path if path == self.folder or path.parent == self.folder else None

    def summary(self, name: str) -> dict[str, Any] | None:
        folder = self._dir(name)
        path = _inside(folder, SUMMARY)
        if path is None or path.stat().st_size > MAX_SUMMARY_BYTES:
            return None
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return value if isinstance(value, dict) else None

    def plot(self, name: str, file: str) -> bytes | None:
        folder = self._dir(name)
        if folder is None or not _NAME.match(file) or not file.endswith(".png"):
            return None
        path = _inside(folder, file)
        if path is None or path.stat().st_size > MAX_PLOT_BYTES:
            return None
        return path.read_bytes()


def _inside(folder: Path | None, file: str) -> Path | None:
    """The file of that name in `folder`, if it is one there: a link that leads out of the folder is not."""
    if folder is None:
        return None
    path = (folder / file).resolve()
    return path if path.parent == folder and path.is_file() else None


def comparison_routes(comparisons: Comparisons) -> list[BaseRoute]:
    """GET /comparisons, /comparisons/{name}/summary.json and /comparisons/{name}/{plot}.png."""
    async def listed(_request: Request) -> Response:
        return JSONResponse({"folder": comparisons.folder is not None, "comparisons": comparisons.listed()})

    async def one(request: Request) -> Response:
        name, file = request.path_params["name"], request.path_params["file"]
        if file == SUMMARY:
            summary = comparisons.summary(name)
            return JSONResponse(summary) if summary is not None else error_response(
                404, f"no comparison {name[:100]!r} in the results folder")
        plot = comparisons.plot(name, file)
        if plot is None:
            return error_response(404, f"no plot {file[:100]!r} of comparison {name[:100]!r}")
        return Response(plot, media_type="image/png", headers={"x-content-type-options": "nosniff"})

    return [Route("/comparisons", listed, methods=["GET"]),
            Route("/comparisons/{name}/{file}", one, methods=["GET"])]

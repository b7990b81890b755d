"""`reactgraph ingest`: add documents to the knowledge base (a FAISS index on disk) that `rag_search` reads."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from rich.progress import Progress

    from reactgraph.memory.vector_store import VectorStore

INDEX_HELP = ("Index directory (default: $REACTGRAPH_INDEX, else $REACTGRAPH_HOME/index-default, which also "
              "holds the bundled knowledge base).")


def _fail(message: str, code: int = 2) -> typer.Exit:
    from reactgraph.cli.console_view import SafeConsole

    SafeConsole(stderr=True, soft_wrap=True).print(f"error: {message}", highlight=False, markup=False)
    return typer.Exit(code)


def _progress(quiet: bool) -> Progress:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from reactgraph.cli.console_view import SafeConsole

    return Progress(TextColumn("[bold]ingesting[/bold]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TextColumn("{task.description}"), console=SafeConsole(stderr=True, soft_wrap=True), transient=True,
                    disable=quiet)


def _ingest_files(store: VectorStore, files: list[Path], progress: Progress) -> list[dict[str, Any]]:
    from reactgraph.memory.vector_store import DocumentRejected, load_document
    from reactgraph.memory.vector_store.documents import MARKDOWN_SUFFIXES

    rows: list[dict[str, Any]] = []
    task = progress.add_task("", total=len(files))
    for path in files:
        progress.update(task, description=path.name)
        try:
            text = load_document(path)
            status, chunks = store.add_document(str(path.resolve()), text,
                                                markdown=path.suffix.lower() in MARKDOWN_SUFFIXES)
            rows.append({"path": str(path), "status": status, "chunks": chunks})
        except DocumentRejected as exc:
            rows.append({"path": str(path), "status": "skipped", "reason": str(exc)})
            progress.console.print(f"skipped: {exc}", highlight=False, markup=False)
        progress.advance(task)
    return rows


def _delete_sources(store: VectorStore, paths: list[Path]) -> list[dict[str, Any]]:
    rows = []
    for path in paths:
        # Files are stored under their absolute path; bundled documents under "kb/<name>".
        source = next((s for s in (str(path.expanduser().resolve()), str(path)) if s in store.sources), None)
        removed = store.delete_source(source) if source else 0
        rows.append({"path": str(path), "status": "deleted" if removed else "not_found", "chunks": removed})
    return rows


def ingest(
    paths: Annotated[list[Path], typer.Argument(metavar="PATH",
                                                help="Files or directories: text and markdown (PDF with the "
                                                     "pdf extra). Directories are searched recursively.")],
    index: Annotated[Path | None, typer.Option("--index", metavar="DIR", help=INDEX_HELP)] = None,
    delete: Annotated[bool, typer.Option("--delete", help="Remove these sources from the index instead.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object and nothing else.")] = False,
) -> None:
    """Add documents to the knowledge base that `rag_search` answers from (`ask --index DIR`).

    Each file is split into chunks, embedded and stored in a FAISS index in the index directory. A file
    ingested again replaces its earlier chunks (unchanged files are skipped). Files over 20 MB, binary
    files and unreadable files are refused with one line each; the exit code is 1 only if nothing could
    be ingested.
    """
    from reactgraph.memory.vector_store import (
        EmbedderMismatch,
        IndexCorrupt,
        VectorStore,
        embedder_from_spec,
        expand_paths,
        signature,
    )
    from reactgraph.tools.builtin.rag import is_default_index, resolve_index, seed_default_index

    directory = resolve_index(index)
    try:
        embedder = embedder_from_spec()
        if is_default_index(directory):
            seed_default_index(directory, embedder)
        with VectorStore.writing(directory, embedder) as store:
            if delete:
                rows = _delete_sources(store, paths)
            else:
                missing = [p for p in paths if not p.exists()]
                files = list(expand_paths(p for p in paths if p.exists()))
                with _progress(as_json) as progress:
                    for path in missing:
                        progress.console.print(f"skipped: {path}: no such file or directory", highlight=False,
                                               markup=False)
                    rows = [{"path": str(p), "status": "skipped", "reason": f"{p}: no such file or directory"}
                            for p in missing] + _ingest_files(store, files, progress)
            total, sources = len(store), len(store.sources)
    except (EmbedderMismatch, IndexCorrupt, ValueError) as exc:
        raise _fail(str(exc)) from exc
    except OSError as exc:
        raise _fail(f"cannot write the index in {directory}: {exc.strerror or exc}") from exc
    _report(rows, {"index": str(directory), "embedder": signature(embedder), "chunks_total": total,
                   "sources_total": sources}, as_json)
    if not any(r["status"] not in ("skipped", "not_found") for r in rows):
        raise typer.Exit(1)


def _report(rows: list[dict[str, Any]], index: dict[str, Any], as_json: bool) -> None:
    """What happened to each file, as one JSON object or one line for people."""
    counts = {status: sum(r["status"] == status for r in rows)
              for status in ("added", "updated", "unchanged", "deleted", "skipped", "not_found")}
    if as_json:
        payload = {"index": index["index"], "embedder": index["embedder"], "files": rows,
                   "counts": {k: v for k, v in counts.items() if v}, "chunks_total": index["chunks_total"],
                   "sources_total": index["sources_total"]}
        sys.stdout.write(json.dumps(payload, ensure_ascii=False) + "\n")
        return
    from reactgraph.cli.console_view import SafeConsole

    summary = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in counts.items() if v) or "nothing to do"
    SafeConsole(soft_wrap=True).print(f"{summary} · index {index['index']}: {index['chunks_total']} chunks from "
                                  f"{index['sources_total']} source(s)", highlight=False, markup=False)

"""Reading documents to ingest: text and markdown (PDF with the optional `pdf` extra); refusing the rest clearly."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from reactgraph.errors import ReactGraphError

MAX_FILE_BYTES = 20 * 1024 * 1024
TEXT_SUFFIXES = frozenset({".md", ".markdown", ".mdx", ".txt", ".text", ".rst", ".org", ".adoc"})
DOCUMENT_SUFFIXES = TEXT_SUFFIXES | {".pdf"}
MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdx"})
_SNIFF_BYTES = 8192


class DocumentRejected(ReactGraphError):
    """A file that will not be ingested; the message says why in one line."""


def _decode(data: bytes, path: Path) -> str:
    if b"\x00" in data[:_SNIFF_BYTES]:
        raise DocumentRejected(f"{path}: binary file (contains NUL bytes)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    # Older Chinese documents are often GBK; gb18030 decodes almost anything, so control characters decide.
    try:
        text = data.decode("gb18030")
    except UnicodeDecodeError:
        text = ""
    controls = sum(1 for ch in text[:_SNIFF_BYTES] if ord(ch) < 32 and ch not in "\t\n\r\f")
    if not text or controls > len(text[:_SNIFF_BYTES]) * 0.01:
        raise DocumentRejected(f"{path}: not UTF-8 or GB18030 text (binary?)")
    return text


def _pdf_text(path: Path) -> str:
    try:
        from pypdf import PdfReader
        from pypdf.errors import PdfReadError
    except ImportError as exc:
        raise DocumentRejected(f"{path}: PDF needs the pdf extra (pip install 'react-graph[pdf]')") from exc
    try:
        reader = PdfReader(path)
        return "\n\n".join(page.extract_text() or "" for page in reader.pages)
    except (PdfReadError, ValueError, KeyError, OSError) as exc:
        raise DocumentRejected(f"{path}: unreadable PDF ({exc})") from exc


def load_document(path: Path, *, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The text of one file; DocumentRejected for missing, huge, binary, unreadable or empty files."""
    if not path.is_file():
        raise DocumentRejected(f"{path}: not a file")
    size = path.stat().st_size
    if size > max_bytes:
        raise DocumentRejected(f"{path}: {size / 1024 / 1024:.1f} MB is over the {max_bytes / 1024 / 1024:g} MB limit")
    if path.suffix.lower() == ".pdf":
        text = _pdf_text(path)
    else:
        try:
            text = _decode(path.read_bytes(), path)
        except OSError as exc:
            raise DocumentRejected(f"{path}: cannot read ({exc.strerror or exc})") from exc
    if not text.strip():
        raise DocumentRejected(f"{path}: no text")
    return text


def expand_paths(paths: Iterable[Path]) -> Iterator[Path]:
    """Files named directly (whatever their suffix), and documents found under named directories."""
    seen: set[Path] = set()
    for path in paths:
        found = (sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in DOCUMENT_SUFFIXES
                        and not any(part.startswith(".") for part in p.relative_to(path).parts))
                 if path.is_dir() else [path])
        for item in found:
            key = item.resolve()
            if key not in seen:
                seen.add(key)
                yield item

"""Documents to ingest: read (text and markdown; PDF with the optional `pdf` extra; the rest refused clearly), then
split into retrievable chunks (markdown sections first, then sentence-aware pieces)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from langchain_text_splitters import RecursiveCharacterTextSplitter

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


CHUNK_CHARS = 400
OVERLAP_CHARS = 60
# Coarse to fine: paragraphs, lines, then sentence ends of Chinese and English, then clauses, then words.
SEPARATORS = ["\n\n", "\n", "。", "！", "？", "；", ". ", "! ", "? ", "; ", "，", ", ", "、", " ", ""]
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


@dataclass(frozen=True)
class Chunk:
    """A piece of a document: its text, the heading path it sits under, and its position in the document."""

    text: str
    section: str
    ordinal: int

    @property
    def embedding_text(self) -> str:
        """What gets embedded: the heading path adds the topic words a chunk in the middle of a section lacks."""
        return f"{self.section}\n{self.text}" if self.section else self.text


def _sections(text: str) -> list[tuple[str, str]]:
    """(heading path "A › B", body) for each markdown section; text before any heading has path ""."""
    sections: list[tuple[str, str]] = []
    path: list[tuple[int, str]] = []
    body: list[str] = []
    fenced = False

    def flush() -> None:
        content = "\n".join(body).strip()
        if content:
            sections.append((" › ".join(title for _, title in path), content))
        body.clear()

    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        match = None if fenced else _HEADING.match(line)
        if match is None:
            body.append(line)
            continue
        flush()
        level = len(match.group(1))
        path = [(lvl, title) for lvl, title in path if lvl < level] + [(level, match.group(2).strip())]
    flush()
    return sections


def split_document(text: str, *, chunk_chars: int = CHUNK_CHARS, overlap_chars: int = OVERLAP_CHARS,
                   markdown: bool = True) -> list[Chunk]:
    """Chunks of at most about `chunk_chars` characters, cut at the coarsest boundary that fits.

    Sentence ends stay with their sentence (keep_separator="end"), so a Chinese chunk ends with "。"
    rather than starting with one; consecutive chunks of a section overlap by up to `overlap_chars`.
    """
    splitter = RecursiveCharacterTextSplitter(separators=SEPARATORS, chunk_size=chunk_chars,
                                              chunk_overlap=overlap_chars, keep_separator="end",
                                              strip_whitespace=True)
    chunks: list[Chunk] = []
    for section, body in _sections(text) if markdown else [("", text)]:
        for piece in splitter.split_text(body):
            if piece.strip():
                chunks.append(Chunk(piece.strip(), section, len(chunks)))
    return chunks

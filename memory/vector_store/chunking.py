"""Splitting documents into retrievable chunks: markdown sections first, then sentence-aware pieces."""

from __future__ import annotations

import re
from dataclasses import dataclass

from langchain_text_splitters import RecursiveCharacterTextSplitter

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

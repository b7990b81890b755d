"""Repetition in a model's reply, cut: a weak model loops the same line, sentence or words until its token limit.

A loop is kept once: a line or a sentence that occurs LOOP_COUNT times or more keeps its first occurrence only,
and a run of the same words repeated back to back LOOP_COUNT times or more shrinks to one copy. Replies are cut
before they are parsed, stored or shown, so a loop never reaches a prompt, a record or a user. A line or phrase
said twice is left alone: people repeat themselves too, loops do not stop at two.
"""

from __future__ import annotations

import re

from langchain_core.messages import AIMessage

LOOP_COUNT = 3  # occurrences that make a loop
MIN_RUN_WORDS = 6  # a repeated run shorter than this ("no, no, no") is emphasis, not a loop
MAX_PERIOD_WORDS = 40  # the longest repeated phrase looked for, in words

_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|(?<=[。！？])")
# Words with the space after them (so the text joins back unchanged); each CJK character is a word of its own.
_WORD = re.compile(r"\s+|[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]\s*|[^\s\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]+\s*")


def _key(text: str) -> str:
    return " ".join(text.split()).casefold()


def _meaningful(text: str) -> bool:
    # Fences, braces and blank lines recur in any well-formed reply; only units with words in them can loop.
    return len(re.sub(r"\W", "", text)) >= 3


def _first_of_each(units: list[str]) -> list[str]:
    """The units with every occurrence after the first of a looping unit dropped."""
    counts: dict[str, int] = {}
    for unit in units:
        if _meaningful(unit):
            counts[_key(unit)] = counts.get(_key(unit), 0) + 1
    seen: set[str] = set()
    kept = []
    for unit in units:
        key = _key(unit)
        if counts.get(key, 0) >= LOOP_COUNT:
            if key in seen:
                continue
            seen.add(key)
        kept.append(unit)
    return kept


def _collapse_runs(words: list[str]) -> list[str]:
    """Back-to-back repeats of the same phrase (LOOP_COUNT copies or more, MIN_RUN_WORDS words in all) as one copy."""
    keys = [w.strip().casefold() for w in words]
    out: list[str] = []
    i = 0
    while i < len(words):
        best_period, best_copies = 0, 0
        for period in range(1, min(MAX_PERIOD_WORDS, (len(words) - i) // LOOP_COUNT) + 1):
            copies = 1
            while keys[i + copies * period:i + (copies + 1) * period] == keys[i:i + period]:
                copies += 1
            span = copies * period
            if copies >= LOOP_COUNT and span >= MIN_RUN_WORDS and span > best_copies * best_period:
                best_period, best_copies = period, copies
        if best_copies and keys[i].strip():
            out.extend(words[i:i + best_period])
            i += best_period * best_copies
        else:
            out.append(words[i])
            i += 1
    return out


def without_repetition(text: str) -> str:
    """The reply with its loops cut (see the module's docstring); a reply without loops is returned unchanged."""
    lines = _first_of_each(text.split("\n"))
    sentences = [_first_of_each(_SENTENCE_END.split(line)) for line in lines]
    cut_lines = []
    for line, parts in zip(lines, sentences, strict=True):
        if len(parts) < len(_SENTENCE_END.split(line)):  # a sentence looped: keep the first of each, one space apart
            line = " ".join(part.strip() for part in parts if part.strip())
        cut_lines.append("".join(_collapse_runs(_WORD.findall(line))))
    cut = "\n".join(cut_lines)
    return text if cut == text else cut.strip()


def reply_without_repetition(reply: AIMessage) -> AIMessage:
    """A tools-protocol reply with the loops of its text cut (same id: a stream has shown it under that id)."""
    if not isinstance(reply.content, str) or (cut := without_repetition(reply.content)) == reply.content:
        return reply
    return reply.model_copy(update={"content": cut})

"""`search`: keyword and fuzzy search over a small bilingual offline knowledge base."""

from __future__ import annotations

import difflib
import json
import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from reactgraph.tools.call import ToolInputError
from reactgraph.tools.meta import ToolMeta

MAX_QUERY_CHARS = 500
MAX_TOP_K = 10
MAX_SNIPPET_CHARS = 600
# Typos are forgiven only in words long enough that a near match is unlikely to be another word.
_FUZZY_CUTOFFS = ((6, 0.8), (5, 0.85))
_MAX_FUZZY_WORDS = 20
# An entry whose keywords the query never names must match this much of the query's IDF weight.
_CONTENT_ONLY_OVERLAP = 0.75
_DATA = Path(__file__).with_name("data") / "knowledge.json"
_SEGMENT = re.compile(r"[a-z0-9][a-z0-9+#]*(?:[.\-][a-z0-9+#]+)*|[\u3400-\u9fff]+")
_CJK = re.compile(r"[\u3400-\u9fff]")
_EN_STOPWORDS = frozenset("""
a an the is are was were be been being am of in on at to for from by with about as and or not no
what whats which who whom whose when where why how do does did done can could would should will
shall may might must please tell me you your i my we our us it its this that these those there here
their they he she his her him them much many some any give show explain describe define definition
meaning mean s know let info information search find look up question answer year years
""".split())
# Question words and particles; longest first so "是什么" goes before "是" and "什么".
_ZH_STOPWORDS = sorted("""
是什么意思 什么意思 有哪些 有什么 是什么 什么是 是多少 什么时候 介绍一下 告诉我 为什么 怎么样
是谁 谁是 哪一年 哪年 何时 多少 请问 介绍 一下 关于 现在 目前 如今 今天 怎样 如何 哪里 哪个
哪些 什么 多大 给我 讲讲 说说 解释 简介 一个 这个 那个 现任 当前 的 了 吗 呢 吧 啊 是 在 和 与 及
有 谁 哪 几
""".split(), key=len, reverse=True)
_ZH_STOP_PATTERN = re.compile("|".join(map(re.escape, _ZH_STOPWORDS)))


def _segments(text: str) -> list[str]:
    """Latin words and CJK runs of `text`, lower-cased, with question words and particles removed."""
    text = unicodedata.normalize("NFKC", text).casefold()
    segments: list[str] = []
    for segment in _SEGMENT.findall(text):
        if _CJK.match(segment):
            segments += [part for part in _ZH_STOP_PATTERN.split(segment) if part]
        elif segment not in _EN_STOPWORDS:
            segments.append(segment)
    return segments


def _tokens(segments: list[str]) -> list[str]:
    """Latin words as they are; Chinese as character bigrams (a lone character stays a unigram)."""
    tokens: list[str] = []
    for segment in segments:
        if _CJK.match(segment):
            tokens += [segment[i:i + 2] for i in range(max(1, len(segment) - 1))]
        else:
            tokens.append(segment)
    return tokens


@dataclass(frozen=True)
class _Keyword:
    compact: str  # no spaces: how CJK keywords are matched
    spaced: str  # words separated by one space: how Latin keywords are matched, on word boundaries
    latin: bool


@dataclass(frozen=True)
class _Entry:
    id: str
    title: dict[str, str]
    content: dict[str, str]
    keywords: tuple[_Keyword, ...]
    tokens: frozenset[str]


@dataclass(frozen=True)
class _Index:
    entries: tuple[_Entry, ...]
    # Single-word Latin keywords -> entries, the vocabulary typos are matched against.
    words: dict[str, tuple[_Entry, ...]]
    idf: dict[str, float]
    unseen_idf: float


def _keyword(text: str) -> _Keyword:
    segments = _segments(text)
    return _Keyword("".join(segments), " ".join(segments), not _CJK.search(text))


@lru_cache(maxsize=1)
def _index() -> _Index:
    raw = json.loads(_DATA.read_text(encoding="utf-8"))["entries"]
    entries = tuple(
        _Entry(item["id"], item["title"], item["content"],
               tuple(k for k in map(_keyword, item["keywords"]) if len(k.compact) >= 2),
               frozenset(_tokens(_segments(" ".join([*item["title"].values(), *item["content"].values()])))))
        for item in raw)
    words: dict[str, list[_Entry]] = {}
    for entry in entries:
        for keyword in entry.keywords:
            if keyword.latin and " " not in keyword.spaced and len(keyword.spaced) >= 5:
                words.setdefault(keyword.spaced, []).append(entry)
    df = Counter(token for entry in entries for token in entry.tokens)
    count = len(entries)
    idf = {token: math.log((count + 1) / (n + 1)) + 1 for token, n in df.items()}
    return _Index(entries, {w: tuple(e) for w, e in words.items()}, idf, math.log(count + 1) + 1)


def _fuzzy_hits(index: _Index, segments: list[str]) -> dict[str, list[tuple[str, float]]]:
    """Entry id -> (query word, similarity) for misspelt Latin words ("langchian" -> langchain)."""
    hits: dict[str, list[tuple[str, float]]] = {}
    candidates = [s for s in segments if not _CJK.match(s) and len(s) >= 5 and s not in index.words]
    for word in candidates[:_MAX_FUZZY_WORDS]:
        cutoff = next(c for length, c in _FUZZY_CUTOFFS if len(word) >= length)
        for match in difflib.get_close_matches(word, index.words, n=3, cutoff=cutoff):
            ratio = difflib.SequenceMatcher(None, word, match).ratio()
            for entry in index.words[match]:
                hits.setdefault(entry.id, []).append((word, ratio))
    return hits


def _keyword_coverage(entry: _Entry, compact: str, spaced: str, fuzzy: list[tuple[str, float]]) -> float:
    """Share of the query's characters named by this entry's keywords (typos count by similarity)."""
    covered = [0.0] * len(compact)
    for keyword in entry.keywords:
        if keyword.latin:
            if not re.search(rf"(?<![a-z0-9]){re.escape(keyword.spaced)}(?![a-z0-9])", spaced):
                continue
        elif keyword.compact not in compact:
            continue
        start = compact.find(keyword.compact)
        for i in range(start, start + len(keyword.compact)):
            covered[i] = 1.0
    for word, ratio in fuzzy:
        start = compact.find(word)
        for i in range(start, start + len(word)):
            covered[i] = max(covered[i], ratio)
    return sum(covered) / len(compact)


def _content_overlap(index: _Index, entry: _Entry, tokens: list[str]) -> tuple[float, int]:
    """IDF-weighted share of query tokens found in the entry's text, and how many were found."""
    weights = {t: index.idf.get(t, index.unseen_idf) for t in set(tokens)}
    found = [t for t in weights if t in entry.tokens]
    return sum(weights[t] for t in found) / sum(weights.values()), len(found)


def _snippet(text: str) -> str:
    return text if len(text) <= MAX_SNIPPET_CHARS else text[: MAX_SNIPPET_CHARS - 1] + "…"


def search_knowledge(query: str, top_k: int = 3) -> dict[str, Any]:
    """Rank knowledge-base entries for `query`; only entries it names (or clearly describes) count."""
    if not query.strip():
        raise ToolInputError("query is empty; give a few keywords, e.g. 'Python 1991' or 'LangChain 作者'")
    if len(query) > MAX_QUERY_CHARS:
        raise ToolInputError(f"query is too long (limit {MAX_QUERY_CHARS} characters); use a few keywords")
    top_k = min(max(top_k, 1), MAX_TOP_K)
    lang = "zh" if _CJK.search(query) else "en"
    index = _index()
    segments = _segments(query)
    compact, spaced, tokens = "".join(segments), " ".join(segments), _tokens(segments)
    fuzzy = _fuzzy_hits(index, segments) if segments else {}
    scored: list[tuple[float, _Entry]] = []
    for entry in index.entries if segments else ():
        coverage = _keyword_coverage(entry, compact, spaced, fuzzy.get(entry.id, []))
        overlap, found = _content_overlap(index, entry, tokens)
        # Without a keyword hit, the entry's text must carry most of the query's distinctive words.
        if coverage > 0 or (overlap >= _CONTENT_ONLY_OVERLAP and found >= 2):
            scored.append((0.6 * coverage + 0.4 * overlap, entry))
    scored.sort(key=lambda pair: pair[0], reverse=True)
    results = [{"title": entry.title[lang], "snippet": _snippet(entry.content[lang]),
                "source": f"offline knowledge base: {entry.id}", "score": round(score, 3)}
               for score, entry in scored[:top_k]]
    answer: dict[str, Any] = {"query": query, "found": bool(results), "results": results}
    if not results:
        answer["message"] = (f"no results for '{query}' in the offline knowledge base "
                             "(it covers only a few dozen topics)")
    return answer


def search(query: str, top_k: int = 3) -> dict[str, Any]:
    """Look up facts in the offline knowledge base (people, companies, AI topics, places, dates).

    Covers e.g. Python, LangChain, LangGraph, ReAct, DeepSeek, OpenAI, Anthropic, NVIDIA's market value,
    SpaceX Starship, Apple and Tim Cook, Elon Musk, Microsoft, Linux, Beijing, Shanghai, the Moon
    landing. It is a dated offline snapshot, not the live web. Snippets come back in the query's
    language (Chinese query -> Chinese text). "found": false means it has nothing on the topic: say
    so instead of inventing an answer.

    Args:
        query: A few keywords or a short question in Chinese or English, e.g. "Python 哪一年发布",
            "苹果 CEO", "who founded LangChain". Name the subject explicitly.
        top_k: How many results to return, 1 to 10.
    """
    return search_knowledge(query, top_k)


def search_tool() -> ToolMeta:
    """The `search` tool: local data and bounded work, so no retries."""
    return ToolMeta.from_function(search, timeout_s=5.0, tags=("knowledge",), max_attempts=1)

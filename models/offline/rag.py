"""Questions about the user's documents: `rag_search` first for them, and `search` ↔ `rag_search` as fallbacks.

"根据知识库，…" / "according to the documents, …" / "in my notes, …" makes the whole question one document
lookup: rag_search with the question (minus the cue), then the knowledge-base `search` if the documents have
nothing. Any question about a named thing that `search` cannot answer (a fact, who holds a role, when something
began) tries rag_search next, when it is bound; a passage found that way must mention the searched key words,
since a nearest neighbour always exists, and must hold the name or date asked for.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection
from typing import Any

from .conversation import Call, Observation, Turn
from .extract import hits
from .faults import failure_reason
from .frames import clean_query
from .question import Question, Task

TOOL = "rag_search"
# The kinds of task answered from search results: the documents are their fallback.
SEARCHED_KINDS = frozenset({"fact", "who", "origin"})
DOCUMENT_CUE = re.compile(
    r"(?:根据|依据|按照|基于|参考|查一?下|查查|从|在)(?:我的|本地的?|已导入的)?(?:知识库|文档|资料库|笔记)(?:里|中|里面)?"
    r"(?:的内容|的资料)?(?:来)?(?:回答|说)?|(?:知识库|我的文档|我的笔记|我的资料)(?:里|中|里面)(?:的内容)?|"
    r"\b(?:according to|based on|from|in|using|per|search)\s+(?:the|my|our)\s+(?:(?:ingested|local|own)\s+)?"
    r"(?:documents?|docs|notes|knowledge base|files)\b",
    re.IGNORECASE)
_EDGE = re.compile(r"^[\s,，:：;；、.。]+|[\s,，:：;；、]+$")
_LATIN = re.compile(r"[a-z][a-z0-9_.+#-]{2,}")
_CJK_RUN = re.compile(r"[\u3400-\u9fff]{2,}")
# A passage found by the fallback must contain this share of the query's key words.
_GROUNDING = 0.5
# Similarity above which a passage is trusted whatever its words; in the question's language a lower one does.
_STRONG_SCORE = 0.6
_SAME_LANGUAGE_SCORE = 0.15


def _cjk_share(text: str) -> float:
    letters = [ch for ch in text if ch.isalpha()]
    return sum("\u3400" <= ch <= "\u9fff" for ch in letters) / len(letters) if letters else 0.0


def document_query(text: str) -> str | None:
    """The question without its document cue, or None when it does not ask about the user's documents."""
    normalized = unicodedata.normalize("NFKC", text)
    if not DOCUMENT_CUE.search(normalized):
        return None
    stripped = _EDGE.sub("", DOCUMENT_CUE.sub(" ", normalized)).strip()
    return re.sub(r"\s+", " ", stripped) or None


def documents_question(question: Question) -> Question:
    """A question with a document cue becomes one document lookup; any other question is returned as it is."""
    query = document_query(question.text)
    if query is None:
        return question
    keywords = clean_query(query) or query
    task = Task(f"fact:{keywords}", "fact", {"query": keywords, "clause": query, "name_wanted": False,
                                             "documents": query})
    return Question(text=question.text, lang=question.lang, tasks=[task])


def route(task: Task, candidates: list[Call], turn: Turn, tools: Collection[str] | None) -> list[Call]:
    """The attempts of a task with rag_search placed: first for a document question, else right after the
    first search (so a fact, a name or a date missing from the knowledge base is looked up in the documents
    before rephrasing)."""
    if task.kind not in SEARCHED_KINDS or not candidates:
        return candidates
    documents = task.params.get("documents")
    call = Call(TOOL, {"query": documents or candidates[0].args.get("query") or task.params.get("query", "")})
    if documents:
        return [call, *candidates]
    available = turn.find(call) is not None if tools is None else TOOL in tools
    if not available or candidates[0].name != "search":
        return candidates
    return [candidates[0], call, *candidates[1:]]


def _key_words(query: str) -> set[str]:
    text = unicodedata.normalize("NFKC", query).casefold()
    words = set(_LATIN.findall(text))
    for run in _CJK_RUN.findall(text):
        words.update(run[i:i + 2] for i in range(len(run) - 1))
    return words


def _grounded(hit: dict[str, Any], words: set[str]) -> bool:
    text = unicodedata.normalize("NFKC", f"{hit.get('title', '')} {hit.get('snippet', '')}").casefold()
    return not words or sum(word in text for word in words) >= _GROUNDING * len(words)


def accept(task: Task, observation: Observation, lang: str) -> tuple[Any, str]:
    """(passages, "") when a rag_search observation answers the task, else (None, why it did not).

    Passages found as a fallback are those that mention the searched words; the caller still reads the name or
    the date it needs out of them."""
    if not observation.ok:
        return None, failure_reason(observation.content, lang, observation.status, observation.attempts)
    data = observation.data
    results = hits(data)
    nothing = "文档中没有找到相关内容" if lang == "zh" else "nothing relevant in the documents"
    if not results:
        message = data.get("message") if isinstance(data, dict) else ""
        return None, str(message or nothing).rstrip("。. ")
    query = str(task.params.get("query") or observation.call.args.get("query", ""))
    words = _key_words(query)
    if not task.params.get("documents"):
        results = [hit for hit in results if _grounded(hit, words)]
        return (results, "") if results else (None, nothing)
    # A document question takes the nearest passages, unless none shares the question's words or language and
    # none scores strongly: then the nearest neighbour (always there) is a guess, said so instead of quoted.
    trusted = [hit for hit in results if _grounded(hit, words) or _strong(hit)
               or (_same_script(hit, query) and _score(hit) >= _SAME_LANGUAGE_SCORE)]
    if not trusted:
        return None, ("文档中最接近的段落与问题的语言或用词不符，无法确定答案" if lang == "zh"
                      else "the closest passages in the documents do not match the question's words or language; "
                           "the answer is uncertain")
    return trusted, ""


def _score(hit: dict[str, Any]) -> float:
    score = hit.get("score")
    return float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else 1.0


def _strong(hit: dict[str, Any]) -> bool:
    return _score(hit) >= _STRONG_SCORE


def _same_script(hit: dict[str, Any], query: str) -> bool:
    """Both mostly Chinese or both mostly Latin script (a passage in another language than the question)."""
    return _cjk_share(str(hit.get("snippet", ""))) >= 0.3 if _cjk_share(query) >= 0.3 else \
        _cjk_share(str(hit.get("snippet", ""))) < 0.3


def describe(call: Call, lang: str) -> str:
    """The Thought's words for a rag_search call."""
    query = call.args.get("query")
    return f"在知识库文档中检索“{query}”" if lang == "zh" else f'search the ingested documents for "{query}"'

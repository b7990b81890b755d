"""Recall for the scripted model: answer "what is my name?" / "我最喜欢的城市是哪个？" from what the user said.

Facts come from the user's earlier messages in the prompt, newest first, then from the conversation
summary (the "Conversation summary:" line of the prompt's notes block, which data_blocks.unframed reads as
a system message, or of a system message; see memory.session_memory), so a fact folded
out of the kept window is still found. A message that only states such facts gets an acknowledgement.
Everything else is left to the planner (None).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from langchain_core.messages import BaseMessage, HumanMessage

from reactgraph.memory.session_memory import summary_from_messages

from .lexicon import language_of, normalize
from .question import split_clauses
from .vocabulary import word_list

_VALUE = r"([^\s，,。.!！?？;；、:：]{1,20})"
_EN_VALUE = r"([A-Za-z][\w'-]*(?: [A-Z][\w'-]*)?)"
_WHAT_ZH = r"(?:什么|啥|哪个|哪一个|哪座|哪里|哪儿|谁)"

# Statements: the topic (favourites only) and the value are the groups.
_NAME_FACTS = (
    re.compile(rf"(?:我|用户)(?:的名字)?(?:叫|名叫){_VALUE}"),
    re.compile(rf"(?:我|用户)的名字是{_VALUE}"),
    re.compile(rf"(?i:\b(?:my|the user'?s|user'?s) name is) {_EN_VALUE}"),
    re.compile(rf"(?i:\b(?:call me|i am called|i'm called)) {_EN_VALUE}"),
)
_FAVOURITE_FACTS = (
    re.compile(rf"(?:我|用户)最喜欢的([^\s，,。是的]{{1,8}})是{_VALUE}"),
    re.compile(r"(?i:\b(?:my|the user'?s|user'?s) favou?rite) ([A-Za-z]+(?: [A-Za-z]+)?) (?i:is|was) "
               r"([\w'-]+(?: [A-Z][\w'-]*)*)"),
)

# Questions about those facts.
_ASK_NAME = re.compile(r"我叫(?:什么|啥)|我的名字(?:是|叫)?(?:什么|啥)|我是谁|"
                       r"(?i:\bwhat(?:'s| is| was) my name\b|\bwho am i\b|\bdo you (?:remember|know) my name\b|"
                       r"\bwhat did i (?:say|tell you) my name (?:is|was)\b)")
_ASK_FAVOURITE = (
    re.compile(rf"我最喜欢的([^\s，,。是的]{{1,8}})是{_WHAT_ZH}"),
    re.compile(r"(?i:\bwhat(?:'s| is| was) my favou?rite) ([A-Za-z]+(?: [A-Za-z]+)?)\s*\??$"),
    re.compile(r"(?i:\bwhat did i (?:say|tell you) my favou?rite) ([A-Za-z]+(?: [A-Za-z]+)?) (?i:is|was)\b"),
    re.compile(r"(?i:\bwhich) ([A-Za-z]+(?: [A-Za-z]+)?) (?i:is my favou?rite)\b"),
)
_QUESTION_WORD = re.compile(r"什么|啥|哪|谁|吗|呢|[?？]|(?i:\b(?:what|which|who|do you)\b)")


@dataclass(frozen=True)
class Fact:
    """Something the user said about themselves: their name, or a favourite (topic → value)."""

    kind: str  # "name" | "favourite"
    topic: str  # canonical, for matching: "city" for both 城市 and city
    value: str
    said: str = ""  # the topic in the user's words


# So "what is my favourite city?" finds "我最喜欢的城市是杭州", and "color" finds "colour".
_SAME_TOPIC: dict[str, str] = word_list("same_topic")

def _topic(text: str) -> str:
    topic = text.strip().lower()
    return _SAME_TOPIC.get(topic, topic)


def _clauses(text: str) -> list[str]:
    return [c for c in re.split(r"[，,。!！;；\n]|(?<=[.!?？])\s+|\band\b", text) if c.strip()]


def facts_in(text: str) -> list[Fact]:
    """The facts stated in a text, in order; questions ("我叫什么？") state none."""
    found = []
    for clause in _clauses(normalize(text)):
        if _QUESTION_WORD.search(clause):
            continue
        for pattern in _NAME_FACTS:
            for match in pattern.finditer(clause):
                found.append(Fact("name", "", match.group(1)))
        for pattern in _FAVOURITE_FACTS:
            for match in pattern.finditer(clause):
                found.append(Fact("favourite", _topic(match.group(1)), match.group(2), match.group(1)))
    return found


def _remembered(messages: Sequence[BaseMessage], last_human: int) -> Iterator[Fact]:
    """Facts newest first: the user's earlier messages, then the summary's lines from the bottom up."""
    for message in reversed(messages[:last_human]):
        if isinstance(message, HumanMessage):
            yield from reversed(facts_in(message.text))
    for line in reversed(summary_from_messages(messages).splitlines()):
        if line.startswith("Q:"):
            line = line[2:].split(" → A:")[0]  # the user's words, not the answers that echo them
        elif line.startswith("A:"):
            continue
        yield from reversed(facts_in(line))


def _asked(question: str) -> list[tuple[str, str]]:
    """Every remembered fact the question asks about, in order: ("name", "") or ("favourite", topic)."""
    asked: list[tuple[str, str]] = [("name", "")] if _ASK_NAME.search(question) else []
    for clause in split_clauses(question):
        for pattern in _ASK_FAVOURITE:
            match = pattern.search(clause)
            if match:
                asked.append(("favourite", match.group(1)))
                break
    return list(dict.fromkeys(asked))


def _say(fact: Fact, zh: bool) -> str:
    if fact.kind == "name":
        return f"你叫{fact.value}" if zh else f"your name is {fact.value}"
    return f"你最喜欢的{fact.said}是{fact.value}" if zh else f"your favourite {fact.said.lower()} is {fact.value}"


def only_statements(question: str) -> list[Fact]:
    """The facts of a message that only states facts ("我叫小明。"): nothing for the tools to do; else []."""
    stated = facts_in(question)
    return stated if stated and len(stated) >= len(_clauses(question)) else []


def _current(messages: Sequence[BaseMessage]) -> tuple[int, str, bool, list[tuple[str, str]]] | None:
    """The last question's index, its normalised text, whether it is Chinese, and the facts it asks about."""
    last_human = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=-1)
    if last_human < 0:
        return None
    question = normalize(messages[last_human].text)
    return last_human, question, language_of(question) == "zh", _asked(question)


def recall_reply(messages: Sequence[BaseMessage]) -> str | None:
    """The answer to a question about what the user said earlier, an acknowledgement of stated facts, or None."""
    current = _current(messages)
    if current is None:
        return None
    last_human, question, zh, asked = current
    if not asked:
        stated = only_statements(question)
        if stated:
            said = "，".join(_say(f, zh) for f in stated) if zh else ", ".join(_say(f, zh) for f in stated)
            return f"好的，我记住了：{said}。" if zh else f"Got it: {said}."
        return None
    lines = [line for line, _ in _recalled(messages, last_human, asked, zh)]
    return "\n".join(lines)


def _recalled(messages: Sequence[BaseMessage], last_human: int, asked: list[tuple[str, str]],
              zh: bool) -> list[tuple[str, bool]]:
    """(reply line, remembered?) for each fact asked about."""
    out: list[tuple[str, bool]] = []
    for kind, topic in asked:
        fact = next((f for f in _remembered(messages, last_human) if f.kind == kind and f.topic == _topic(topic)),
                    None)
        if fact is not None:
            said = _say(replace(fact, said=topic), zh)
            out.append((f"{said}（这是你之前告诉我的）。" if zh
                        else f"{said[0].upper()}{said[1:]} (you told me earlier).", True))
        elif kind == "name":
            out.append(("你还没有告诉过我你的名字。" if zh else "You haven't told me your name yet.", False))
        else:
            out.append((f"你还没有告诉过我你最喜欢的{topic}。" if zh
                        else f"You haven't told me your favourite {topic} yet.", False))
    return out


def recall_coverage(messages: Sequence[BaseMessage]) -> tuple[list[str], list[str]] | None:
    """(parts, missing) of a question about what the user said earlier; None for other questions."""
    current = _current(messages)
    if current is None:
        return None
    last_human, question, zh, asked = current
    if not asked:
        # a message that only states facts asks for nothing: it is answered by its acknowledgement
        return ([], []) if only_statements(question) else None
    labels = [("你的名字" if zh else "your name") if kind == "name"
              else (f"你最喜欢的{topic}" if zh else f"your favourite {topic}") for kind, topic in asked]
    found = [ok for _, ok in _recalled(messages, last_human, asked, zh)]
    return labels, [label for label, ok in zip(labels, found, strict=True) if not ok]

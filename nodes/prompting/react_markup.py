"""ReAct markup in model text — labels, code fences, inline code — and the text without it.

The text-protocol parser (text_protocol.py) reads replies through these helpers, and finalize strips the
same markup from a final answer, whichever protocol wrote it (a tools-protocol model may still answer with
`Thought: … Final Answer: …`).
"""

from __future__ import annotations

import re

# Bold/italic markers after the colon belong to the label only when it opened with them (`**Action:**`); a
# backtick there opens the value (``Action Input: `2**10` ``), it is not decoration to drop.
LABEL = re.compile(r"^[ \t>#`-]*(?P<open>[*_]{1,3})?[ \t`]*"
                   r"(?P<label>thought|action[ \t_-]*input|action|final[ \t_-]*answer|observation)"
                   r"[ \t*_`]*[:：][ \t]*(?(open)[*_]{0,3})[ \t]*", re.I | re.M)
FENCE = re.compile(r"^[ \t]*(```|~~~)[\w-]*[ \t]*$", re.M)
_BARE_FENCE = re.compile(r"^[ \t]*(```|~~~)[ \t]*$")
_PROSE_FENCE = re.compile(r"^[ \t]*(```|~~~)(?:text|txt|markdown|md|plain|plaintext)?[ \t]*$", re.I)
# A value in a code fence: ```lang⏎body```, or on one line ```body``` / ```json body```; an unclosed one too.
_FENCED = re.compile(r"(?P<f>`{3,}|~{3,})(?:[\w+-]*[ \t]*\n|(?:json|python|py|text|txt|plain)[ \t]+)?"
                     r"(?P<body>.*?)[ \t]*\n?[ \t]*(?:(?P=f)|\Z)", re.S)
_INLINE_CODE = re.compile(r"(?P<t>`+)(?P<body>[^`]+)(?P=t)")


def normalized(text: str | None) -> str:
    """The text with CRLF / CR line ends as "\\n", so line-anchored patterns see every line."""
    return (text or "").replace("\r\n", "\n").replace("\r", "\n")


def _label(raw: str) -> str:
    return re.sub(r"[\s_-]+", " ", raw.lower())


def unwrap(text: str) -> str:
    """A reply wrapped whole in a code fence is read without the fence (and without chatter after it)."""
    lines = text.strip().splitlines()
    closing = [i for i, line in enumerate(lines) if i and _BARE_FENCE.match(line)]
    if len(lines) >= 2 and FENCE.match(lines[0]) and closing:
        after = "\n".join(lines[closing[-1] + 1:])
        if not LABEL.search(after):  # what follows the fence is prose, not more of the reply
            return "\n".join(lines[1:closing[-1]])
    return text


def sections(text: str) -> list[tuple[str, str]]:
    """(label, value) pairs in order; text before the first label is filed under "thought"."""
    matches = list(LABEL.finditer(text))
    head = text[:matches[0].start()] if matches else text
    found = [("thought", head.strip())] if head.strip() else []
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        found.append((_label(match.group("label")), text[match.end():end].strip()))
    return found


def input_text(raw: str | None) -> str:
    """An Action Input without its formatting: a code fence or inline backticks around it, prose after it.

    JSON (an object or a list) is left to the decoder, which reads one value and ignores chatter after an
    object; a bare value is its first line, since what follows is the model talking.
    """
    text = normalized(raw).strip()
    if text.startswith(("```", "~~~")) and (fenced := _FENCED.match(text)):
        return fenced.group("body").strip()  # a fenced value is kept whole: its lines are meant
    if text[:1] in "{[":
        return FENCE.sub("", text).strip()
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if inline := _INLINE_CODE.match(first):
        return inline.group("body").strip()
    return first.strip("`").strip()


def _without_wrapper_fence(text: str) -> str:
    """An answer fenced whole as prose (``` / ```text / ```markdown, or around ReAct labels) loses the fence;
    a fence with a language around code is the answer's own formatting and stays."""
    lines = text.strip().splitlines()
    if len(lines) < 2 or not FENCE.match(lines[0]) or not _BARE_FENCE.match(lines[-1]):
        return text.strip()
    inside = "\n".join(lines[1:-1])
    if FENCE.search(inside):  # two blocks with text between them, not one wrapper
        return text.strip()
    return inside.strip() if _PROSE_FENCE.match(lines[0]) or LABEL.search(inside) else text.strip()


def answer_without_markup(answer: str) -> str:
    """A final answer as the user should read it: what follows `Final Answer:` (the Thought before it
    dropped), a lone leading `Thought:` label removed, a wrapper fence removed; other text is unchanged."""
    text = _without_wrapper_fence(normalized(answer))
    found = sections(text)
    final = next((value for label, value in found if label == "final answer"), None)
    if final is not None:
        if len(FENCE.findall(final)) % 2:  # an unmatched fence closed a wrapper, not the answer's own code
            final = FENCE.sub("", final)
        return _without_wrapper_fence(final) or text
    if [label for label, _ in found] == ["thought"] and LABEL.match(text):
        return found[0][1] or text
    return text

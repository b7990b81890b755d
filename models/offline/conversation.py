"""Reading a conversation: what the scripted offline model takes from the messages it is given.

The last human message is the question; the human messages before it are context, and after it come this turn's
tool calls and their observations, each with the gateway's status and attempts when the result carries them (a
result cut short by a length budget is salvaged field by field). Framed data is read for its facts only: a tool
result is taken out of its `<tool_output>` frame with nothing inside obeyed, and the `<notes>` block that opens the
question's message (summary, reflection note, plan, lessons: data written by a model) is set apart as context, so
that only the question after it is read as the question. A transcript in the text ReAct protocol (Thought / Action /
Observation, used when the caller stops at "Observation:") is turned into the same tool-calling shape, so that one
planner decides every next step, and the reply is written back in that format. The output of a user's tool that
replaced a built-in (same name, another shape) is passed through as it is, bounded, instead of being misread as
"nothing found". And what the user said about themselves is remembered: a question such as "what is my name?" or
"我最喜欢的城市是哪个？" is answered by recall, from the user's earlier messages newest first and then from the
conversation summary in the notes (memory.session_memory), so that a fact folded out of the kept window is still
found; a message that only states such facts gets an acknowledgement, and everything else is left to the planner.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from reactgraph.memory.session_memory import summary_from_messages
from reactgraph.tools import untrusted

from .question import split_clauses
from .words import language_of, normalize, word_list

NOTES = "notes"  # the name of the context message a notes block becomes (`unframed`)


@dataclass(frozen=True)
class Call:
    """A tool call as the planner thinks of it: a tool name and its arguments."""

    name: str
    args: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def key(self) -> tuple[str, str]:
        """Identity of a call: same tool and same arguments means the same call."""
        return self.name, json.dumps(self.args, sort_keys=True, ensure_ascii=False)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Call) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)


@dataclass(frozen=True)
class Observation:
    """One tool call of this turn and what came back."""

    call: Call
    call_id: str
    round: int  # 1-based round (AI message with tool calls) within the turn
    ok: bool
    content: str
    data: Any = None  # the parsed JSON of an ok result
    # The gateway's ToolStatus and attempts, when the result carries them (the act node's
    # `response_metadata["gateway"]`); the text protocol's observations do not, and their failure is read from the
    # text (`failures.failure_reason`).
    status: str = ""
    attempts: int = 0
    edited: bool = False  # a person edited the call before it ran (the fact `approval: "edited"`; decisions.py)


@dataclass(frozen=True)
class Turn:
    """Everything the scripted model reads from the messages it is given."""

    question: str
    history: tuple[str, ...] = ()
    observations: tuple[Observation, ...] = ()
    rounds: int = 0
    prior_calls: int = 0
    used_ids: frozenset[str] = frozenset()
    declined: tuple[Call, ...] = ()  # calls a person rejected in an earlier trial (the notes' lesson)

    @property
    def lang(self) -> str:
        return language_of(self.question)

    def latest_round(self) -> tuple[Observation, ...]:
        return tuple(o for o in self.observations if o.round == self.rounds and self.rounds)

    def earlier(self) -> tuple[Observation, ...]:
        return tuple(o for o in self.observations if o.round < self.rounds)

    def repeated(self) -> bool:
        """The latest round re-ran an earlier call of this turn (same tool and arguments) and learned nothing new."""
        earlier = self.earlier()
        return any(o.call == e.call and o.content == e.content for o in self.latest_round() for e in earlier)

    def find(self, call: Call) -> Observation | None:
        """The latest observation of exactly this call (an ok one preferred), if it was made this turn."""
        matches = [o for o in self.observations if o.call == call]
        ok = [o for o in matches if o.ok]
        return (ok or matches)[-1] if matches else None


_STR = r'"(?:[^"\\]|\\.)*"'
_SCALAR = re.compile(rf'"(\w+)"\s*:\s*({_STR}|-?\d+(?:\.\d+)?|true|false|null)')
_HIT = re.compile(rf'\{{\s*"title"\s*:\s*({_STR})\s*,\s*"snippet"\s*:\s*({_STR})(?:\s*,\s*"source"\s*:\s*({_STR}))?')


def _parse(content: str) -> Any:
    """A tool result as JSON; a result cut short by a length budget is salvaged field by field."""
    try:
        return json.loads(content)
    except (TypeError, ValueError, RecursionError):  # RecursionError: a tool's output nested past the parser
        pass
    if not content.lstrip().startswith("{"):
        return content
    data: dict[str, Any] = {}
    for key, raw in _SCALAR.findall(content):
        data.setdefault(key, _scalar(raw))
    hits = [{"title": _scalar(t), "snippet": _scalar(s), "source": _scalar(src) if src else ""}
            for t, s, src in _HIT.findall(content)]
    if hits:
        data["results"] = hits
    return data or content


def _scalar(raw: str) -> Any:
    """A JSON scalar salvaged from a cut result; as text when Python will not read it (an integer of more digits
    than `int` converts)."""
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _outcome(result: ToolMessage) -> tuple[str, int, bool]:
    """(status, attempts, edited by a person) from the gateway's facts on the result, allow-listed and bounded
    ("", 0 and False when absent)."""
    facts = (result.response_metadata or {}).get("gateway")
    facts = facts if isinstance(facts, dict) else {}
    status = facts.get("status")
    attempts = facts.get("attempts")
    return (status if isinstance(status, str) and len(status) <= 32 else "",
            attempts if isinstance(attempts, int) and 0 <= attempts <= 1000 else 0,
            facts.get("approval") == "edited")


# How the model words the rejected calls in its lesson, and reads them back: "<marker> name {args}; name {args}."
_DECLINED = {"zh": "审批人拒绝了这些调用，不要再请求：",
             "en": "A person rejected these calls; do not ask for them again: "}
_DECLINED_AT = re.compile("|".join(re.escape(marker) for marker in _DECLINED.values()))
_CALL_NAME = re.compile(r"\s*[;；]?\s*(?P<name>[\w.-]{1,64}) (?=\{)")
MAX_DECLINED = 20  # a lesson names a few; more read back would only be a bigger prompt's worth of noise


def declined_line(calls: Iterable[Call], lang: str) -> str:
    """The lesson's sentence naming the calls a person rejected ("" when there are none)."""
    named = list(dict.fromkeys(calls))[:MAX_DECLINED]
    if not named:
        return ""
    listed = ("；" if lang == "zh" else "; ").join(
        f"{call.name} {json.dumps(call.args, ensure_ascii=False, sort_keys=True)}" for call in named)
    return f"{_DECLINED['zh' if lang == 'zh' else 'en']}{listed}{'。' if lang == 'zh' else '.'}"


def declined_in(text: str) -> tuple[Call, ...]:
    """The calls a lesson in `text` says a person rejected."""
    found: list[Call] = []
    decoder = json.JSONDecoder()
    for marker in _DECLINED_AT.finditer(text):
        at = marker.end()
        while len(found) < MAX_DECLINED and (name := _CALL_NAME.match(text, at)):
            try:
                args, at = decoder.raw_decode(text, name.end())
            except ValueError:
                break
            if isinstance(args, dict):
                found.append(Call(name.group("name"), args))
    return tuple(dict.fromkeys(found))


def read_turn(messages: Sequence[BaseMessage]) -> Turn:
    """Split the conversation at the last human message: before it is context, after it is this turn."""
    last_human = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=-1)
    question = messages[last_human].text.strip() if last_human >= 0 else ""
    history = tuple(m.text for m in messages[:max(last_human, 0)] if isinstance(m, HumanMessage))
    used_ids: set[str] = set()
    prior_calls = 0
    for message in messages:
        if isinstance(message, AIMessage):
            prior_calls += len(message.tool_calls)
            used_ids.update(tc.get("id") or "" for tc in message.tool_calls)

    calls: dict[str, tuple[Call, int]] = {}
    order: list[str] = []
    results: dict[str, ToolMessage] = {}
    rounds = 0
    for message in messages[last_human + 1:]:
        if isinstance(message, AIMessage) and message.tool_calls:
            rounds += 1
            for tc in message.tool_calls:
                call_id = tc.get("id") or f"anon_{len(order)}"
                calls[call_id] = (Call(tc["name"], dict(tc.get("args") or {})), rounds)
                order.append(call_id)
        elif isinstance(message, ToolMessage):
            results[message.tool_call_id] = message

    observations = []
    for call_id in order:
        call, round_no = calls[call_id]
        result = results.get(call_id)
        if result is None:
            observations.append(Observation(call, call_id, round_no, False, "No result was returned."))
            continue
        ok = getattr(result, "status", "success") != "error"
        status, attempts, edited = _outcome(result)
        # An edited call's result opens with a line saying what the person changed; the tool's output follows.
        content = str(result.text).split("\n", 1)[-1] if edited else str(result.text)
        observations.append(Observation(call, call_id, round_no, ok, content, _parse(content) if ok else None,
                                        status, attempts, edited))
    notes = messages[last_human - 1] if last_human >= 1 else None  # the notes that open the question's message
    declined = declined_in(notes.text) if isinstance(notes, SystemMessage) and notes.name == NOTES else ()
    return Turn(question=question, history=history, observations=tuple(observations), rounds=rounds,
                prior_calls=prior_calls, used_ids=frozenset(used_ids), declined=declined)


def unframed(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The messages with tool results unframed, and a notes block (which opens the question's message) set apart
    from the question as a context message."""
    out: list[BaseMessage] = []
    for message in messages:
        if isinstance(message, HumanMessage) and untrusted.is_notes(message.text):
            body, rest = untrusted.split_notes(message.text)
            out.append(SystemMessage(body, name=NOTES))
            if rest.strip():
                out.append(HumanMessage(rest, id=message.id))
        elif isinstance(message, ToolMessage) and isinstance(message.content, str):
            out.append(message.model_copy(update={"content": untrusted.tool_output_body(message.content)}))
        else:
            out.append(message)
    return out


_ACTION = re.compile(r"Action\s*[:：]\s*(?P<name>[\w.-]+)\s*\n\s*Action Input\s*[:：]\s*(?P<input>.*?)"
                     r"(?=\n\s*Observation\s*[:：]|\n\s*Thought\s*[:：]|\Z)", re.S)
_OBSERVATION = re.compile(r"^\s*Observation\s*[:：]\s*", re.S)
_LABELLED = re.compile(r"^\s*Observation\s*[:：]", re.M)
_ERROR = re.compile(r"timed out|failed|invalid arguments|unknown tool|unavailable|circuit open|denied|"
                    r"not permitted|is disabled|is busy|rate limit|^error\b", re.I)


def is_text_protocol(stop: Sequence[str] | None) -> bool:
    return any(s.strip().startswith("Observation") for s in stop or [])


def _parse_input(raw: str) -> dict:
    raw = raw.strip().strip("`").strip()
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return {"input": raw}
    return value if isinstance(value, dict) else {"input": value}


def to_tool_messages(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The transcript as tool-calling messages: Action blocks become tool calls, Observations ToolMessages."""
    out: list[BaseMessage] = []
    pending: list[str] = []
    counter = 0

    def observe(text: str) -> None:
        if not pending:
            return
        call_id = pending.pop(0)
        content = _OBSERVATION.sub("", text, count=1).strip()
        framed_error = untrusted.is_error_block(content)
        content = untrusted.tool_output_body(content)  # the frame off; what is inside is only ever data
        try:
            json.loads(content)
            status = "error" if framed_error else "success"
        except (ValueError, RecursionError):
            status = "error" if framed_error or _ERROR.search(content) else "success"
        out.append(ToolMessage(content, tool_call_id=call_id, status=status))

    for message in messages:
        text = message.text
        if isinstance(message, SystemMessage):
            out.append(message)
        elif isinstance(message, (HumanMessage, ToolMessage)) and _OBSERVATION.match(text):
            observe(text)
        elif isinstance(message, HumanMessage):
            out.append(message)
        elif isinstance(message, AIMessage):
            parts = re.split(r"\n\s*(?=Observation\s*[:：])", text)
            for part in parts:
                if _OBSERVATION.match(part):
                    observe(part)
                    continue
                calls = []
                for match in _ACTION.finditer(part):
                    call_id = f"text_{counter}"
                    counter += 1
                    calls.append({"name": match.group("name"), "args": _parse_input(match.group("input")),
                                  "id": call_id, "type": "tool_call"})
                    pending.append(call_id)
                out.append(AIMessage(part, tool_calls=calls) if calls else AIMessage(part))
    return out


def as_tool_messages(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The messages in tool-calling shape: a text-protocol transcript is converted, anything else is kept."""
    has_calls = any(isinstance(m, AIMessage) and m.tool_calls for m in messages)
    textual = any((isinstance(m, AIMessage) and _ACTION.search(m.text))
                  or (isinstance(m, HumanMessage) and _LABELLED.search(m.text)) for m in messages)
    return to_tool_messages(messages) if textual and not has_calls else list(messages)


def render_plan(args: dict) -> str:
    """A Plan's or Replan's arguments as a numbered list, one `N. goal (tool: name)` line a step: how a plan is
    written without a schema (the text protocol's plan and replan requests)."""
    lines = []
    if "avoid_tools" in args:
        lines += [f"Reason: {args.get('reason') or ''}", f"Avoid tools: {', '.join(args['avoid_tools']) or 'none'}"]
    steps = args.get("steps") or []
    lines.append("Plan:" if steps else "Plan: none")
    lines += [f"{i}. {step['goal']} (tool: {step.get('tool') or 'none'})" for i, step in enumerate(steps, 1)]
    return "\n".join(lines)


def render_action(thought: str, name: str, args: dict) -> str:
    return f"Thought: {thought}\nAction: {name}\nAction Input: {json.dumps(args, ensure_ascii=False)}"


def render_final(answer: str, lang: str) -> str:
    thought = "我已经可以回答了。" if lang == "zh" else "I can answer now."
    return f"Thought: {thought}\nFinal Answer: {answer}"


_LIMIT = 600
# Parts whose answer is the tool's output itself (not the parts that need a number or a date from it).
PASSTHROUGH_KINDS = frozenset({"weather", "time", "calc", "fact", "http"})
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
# The keys that say an output has the built-in's shape (then the built-in's rules read it).
_SHAPES: dict[str, tuple[str, ...]] = {
    "calculator": ("result", "error"), "get_time": ("time", "iso", "date"),
    "get_weather": ("found", "temperature_c", "condition"), "search": ("results", "found", "message"),
    "http_get": ("status_code", "body", "url"),
}


def is_foreign_output(observation: Observation) -> bool:
    """An ok result of a built-in's name whose output has none of the built-in's keys."""
    keys = _SHAPES.get(observation.call.name)
    if keys is None or not observation.ok or not observation.content.strip():
        return False
    data = observation.data
    return not (isinstance(data, dict) and any(k in data for k in keys))


def passthrough_value(observation: Observation) -> dict[str, Any]:
    """The observation as a pass-through value: the tool's name and its output as bounded text."""
    data = observation.data
    if isinstance(data, dict):
        text = "; ".join(f"{k}: {json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else v}"
                         for k, v in data.items())
    elif data is not None and not isinstance(data, str):
        text = json.dumps(data, ensure_ascii=False)
    else:
        text = observation.content
    text = _CONTROL.sub(" ", " ".join(text.split()))
    if len(text) > _LIMIT:
        text = text[:_LIMIT].rstrip() + "…"
    return {"passthrough": text, "tool": observation.call.name}


def passthrough_line(data: dict[str, Any], lang: str) -> str:
    tool, text = data["tool"], data["passthrough"]
    if data.get("person"):  # a person answered the call at the approval step: said as theirs, not the tool's
        return f"审批人代替 {tool} 答复：{text}" if lang == "zh" else f"A person answered for {tool}: {text}"
    return f"{tool} 返回：{text}" if lang == "zh" else f"{tool} returned: {text}"


def is_passthrough(data: Any) -> bool:
    return isinstance(data, dict) and "passthrough" in data


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

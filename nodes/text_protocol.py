"""A model's reply read as text: the text ReAct protocol, ReAct markup, loops cut, and the format-error budget.

The text protocol is for models without native tool calling. The model reads a Thought / Action / Action Input /
Observation transcript and is called with `stop=["Observation:"]`. Its reply is parsed and turned into an
ordinary AIMessage with `tool_calls` (the Thought as content), so act, observe, reflect and finalize, and the step
records, are the same in both protocols; only the request is rendered as text. Reflection in `llm` mode uses the
rules there, since a text-only model may offer no structured output. The parser reads labels, code fences and
inline code through the markup helpers, and the closing nodes strip the same markup from a final answer,
whichever protocol wrote it (a tools-protocol model may still answer with `Thought: … Final Answer: …`).

Every reply, in either protocol, is cut of its loops before it is parsed, stored or shown (`without_repetition`):
a weak model loops the same line, sentence or words until its token limit. A loop is kept once: a line or a
sentence that occurs LOOP_COUNT times or more keeps its first occurrence only, and a run of the same words
repeated back to back LOOP_COUNT times or more shrinks to one copy. A line or phrase said twice is left alone:
people repeat themselves too, loops do not stop at two.

A reply the parser cannot use is answered with a short format note and asked for again (`read_reply`, the same
for every node that asks for one), while the run's budget (`Context.max_format_errors`, counted from the turn's
`format_error` records) lasts. The request never grows with the junk: the unusable reply is replaced by a fixed
stand-in, and only the latest correction follows it, so call N is as long as call 2.
"""

from __future__ import annotations

import ast
import json
import logging
import re
import time
import uuid
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Protocol, TypeVar

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage

from reactgraph.models.gateway import ModelCall
from reactgraph.nodes import prompts
from reactgraph.nodes.conversation import pending_calls, tokens_of
from reactgraph.nodes.driver import Request, log_fallback
from reactgraph.nodes.state import ExecutionStep, make_step, steps_of
from reactgraph.tools import untrusted

# --- ReAct markup: labels, code fences, inline code ---------------------------------------------------------

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


def labelled_sections(text: str) -> list[tuple[str, str]]:
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
    found = labelled_sections(text)
    final = next((value for label, value in found if label == "final answer"), None)
    if final is not None:
        if len(FENCE.findall(final)) % 2:  # an unmatched fence closed a wrapper, not the answer's own code
            final = FENCE.sub("", final)
        return _without_wrapper_fence(final) or text
    if [label for label, _ in found] == ["thought"] and LABEL.match(text):
        return found[0][1] or text
    return text



# --- the text protocol --------------------------------------------------------------------------------------

STOP = ["Observation:"]

_INLINE_ARGS = re.compile(r"^(?P<name>[\w.-]+)\s*[(\[](?P<args>.*)[)\]]\s*$", re.S)
_NO_ACTION = {"", "none", "n/a", "na", "null", "无", "没有"}


@dataclass(frozen=True)
class ReactReply:
    """One reply read leniently: a Thought plus either an Action (with raw input) or a Final Answer."""

    thought: str = ""
    action: str | None = None
    action_input: str | None = None
    final_answer: str | None = None
    problem: str | None = None  # why the reply is unusable, when it has neither an Action nor a Final Answer


def parse_reply(text: str) -> ReactReply:
    """Read a reply: labels in any case, "：" for ":", code fences, and a made-up Observation cut off.

    A tool-output or notes block the model echoed is dropped first: protocol lines inside it are data (a page
    that says "Final Answer: …" must not end the run when the model repeats it).
    """
    sections = labelled_sections(unwrap(untrusted.without_data_blocks(normalized(text))))
    # Everything from the first Observation on was invented by the model (a server that ignored `stop`).
    cut = next((i for i, (label, _) in enumerate(sections) if label == "observation"), len(sections))
    sections = sections[:cut]
    labels = [label for label, _ in sections]
    thought = "\n".join(value for label, value in sections[:_first(labels, "action", "final answer")]
                        if label == "thought").strip()
    act_at, final_at = _first(labels, "action"), _first(labels, "final answer")
    if act_at < final_at:
        name, _, rest = sections[act_at][1].partition("\n")
        name = name.strip().strip("`*'\"").strip()
        if name.lower() not in _NO_ACTION:
            following = sections[act_at + 1] if act_at + 1 < len(sections) else ("", "")
            raw_input = following[1] if following[0] == "action input" else (rest.strip() or None)
            inline = _INLINE_ARGS.match(name)
            if inline and raw_input is None:
                name, raw_input = inline.group("name"), inline.group("args")
            return ReactReply(thought=thought, action=name, action_input=raw_input)
    if final_at < len(sections):
        answer = sections[final_at][1]
        if len(FENCE.findall(answer)) % 2:  # an unmatched fence closes a wrapper, not the answer's code
            answer = FENCE.sub("", answer)
        if answer := answer.strip():
            return ReactReply(thought=thought, final_answer=answer)
        return ReactReply(thought=thought, problem="the Final Answer is empty")
    if act_at < len(sections):
        return ReactReply(thought=thought, problem="'Action:' names no tool and there is no 'Final Answer:'")
    return ReactReply(thought=thought, problem="the reply has neither 'Action:' nor 'Final Answer:'")


def _first(labels: list[str], *wanted: str) -> int:
    return next((i for i, label in enumerate(labels) if label in wanted), len(labels))


# --- from a parsed reply to a tool call --------------------------------------------------------------------

def _schema_of(schemas: Sequence[dict[str, Any]], name: str) -> tuple[str, dict[str, Any]] | None:
    """The offered tool a name refers to (exact, else case-insensitive) and its parameter schema."""
    tools = {s["function"]["name"]: s["function"].get("parameters") or {} for s in schemas}
    if name in tools:
        return name, tools[name]
    folded = [t for t in tools if t.lower() == name.lower()]
    # "the calculator tool" still means calculator, as long as exactly one offered tool is named.
    named = folded or [t for t in tools if re.search(rf"(?<![\w-]){re.escape(t)}(?![\w-])", name, re.I)]
    return (named[0], tools[named[0]]) if len(named) == 1 else None


def _single_parameter(parameters: dict[str, Any]) -> str | None:
    required = parameters.get("required") or []
    if len(required) == 1:
        return required[0]
    properties = list(parameters.get("properties") or {})
    return properties[0] if len(properties) == 1 else None


def _decode(raw: str) -> tuple[bool, Any]:
    """(parsed?, value): JSON (an object may be followed by chatter), a single-quoted dict, else the string."""
    try:
        value, end = json.JSONDecoder().raw_decode(raw)
        if isinstance(value, dict) or not raw[end:].strip():
            return True, value
    except ValueError:
        pass
    if raw.startswith("{"):
        try:  # up to the last brace: a single-quoted dict may be followed by chatter too
            value = ast.literal_eval(raw[:raw.rfind("}") + 1])  # literals only: nothing is ever executed
            json.dumps(value, allow_nan=False)  # arguments must stay JSON (sets, bytes, 1j are not)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return False, raw
        return isinstance(value, dict), value
    return False, raw


def tool_args(raw: str | None, parameters: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """Arguments from an Action Input: a JSON object, or a bare value for the tool's single parameter."""
    raw = input_text(raw)
    if not raw:
        return {}, None
    parsed, value = _decode(raw)
    if parsed and isinstance(value, dict):
        return value, None
    if not parsed and raw[:1] in "{[":
        return None, "Action Input is not valid JSON"
    if isinstance(value, list):
        return None, "Action Input must be a JSON object, not a list"
    single = _single_parameter(parameters)
    if single is None:
        names = ", ".join(parameters.get("properties") or {}) or "none"
        return None, f"Action Input must be a JSON object with the arguments ({names})"
    if not isinstance(value, str) and (parameters.get("properties") or {}).get(single, {}).get("type") == "string":
        value = raw  # `Action Input: 2` for a string parameter means the text "2"
    elif isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] and value[0] in "'`":
        value = value[1:-1]
    return {single: value}, None


def to_ai_message(reply: ReactReply, raw_text: str, schemas: Sequence[dict[str, Any]],
                  source: AIMessage | None = None) -> AIMessage:
    """The parsed reply as a normal AIMessage: the Thought plus one tool call, or the Final Answer."""
    extra = {"usage_metadata": source.usage_metadata, "response_metadata": source.response_metadata,
             **({"id": source.id} if source.id else {})} if source is not None else {}
    kwargs = {"react_text": raw_text}  # what the model actually wrote, for debugging
    if reply.final_answer is not None:
        return AIMessage(content=reply.final_answer, additional_kwargs=kwargs, **extra)
    call_id = f"call_{uuid.uuid4().hex[:16]}"
    found = _schema_of(schemas, reply.action or "")
    name, parameters = found if found else (reply.action or "", {})
    args, problem = tool_args(reply.action_input, parameters) if found else (_loose_args(reply.action_input), None)
    if args is None:
        return AIMessage(content=reply.thought, additional_kwargs=kwargs, invalid_tool_calls=[
            {"name": name, "args": reply.action_input, "id": call_id, "error": problem, "type": "invalid_tool_call"}],
            **extra)
    return AIMessage(content=reply.thought, additional_kwargs=kwargs, **extra,
                     tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}])


def _loose_args(raw: str | None) -> dict[str, Any]:
    # An unknown tool is refused by the gateway anyway; its arguments only need to be recordable.
    parsed, value = _decode(input_text(raw))
    return value if parsed and isinstance(value, dict) else ({"input": raw} if raw else {})


# --- the request: instructions and the conversation as text ------------------------------------------------

def tool_names(schemas: Sequence[dict[str, Any]]) -> str:
    return ", ".join(s["function"]["name"] for s in schemas)


def instructions(schemas: Sequence[dict[str, Any]]) -> str:
    """The protocol part of the system prompt: the offered tools with their JSON schemas, format, examples."""
    lines = [prompts.TEXT_TOOL_LINE.format(
        name=s["function"]["name"], description=" ".join((s["function"].get("description") or "").split()),
        parameters=json.dumps(s["function"].get("parameters") or {}, ensure_ascii=False)) for s in schemas]
    offered = {s["function"]["name"] for s in schemas}
    examples = [text for tool, text in prompts.TEXT_EXAMPLES.items() if tool in offered][:2]
    examples.append(prompts.TEXT_EXAMPLE_NO_TOOL)
    return prompts.TEXT_PROTOCOL_PROMPT.format(
        tools="\n".join(lines) or prompts.TEXT_NO_TOOLS, tool_names=tool_names(schemas),
        examples=prompts.TEXT_EXAMPLES_HEADER + "\n\n" + "\n\n".join(examples))


def format_correction(problem: str, schemas: Sequence[dict[str, Any]]) -> str:
    return prompts.TEXT_FORMAT_CORRECTION.format(problem=problem, tool_names=tool_names(schemas) or "none")


def _action_text(thought: str, call: dict[str, Any]) -> str:
    args = call.get("args")
    shown = args if isinstance(args, str) else json.dumps(args or {}, ensure_ascii=False)
    return "\n".join([*([f"Thought: {thought}"] if thought else []), f"Action: {call['name']}",
                      f"Action Input: {shown}"])


def _observation(message: ToolMessage, tool: str | None = None) -> HumanMessage:
    """A tool result as the user's "Observation:" message, its text framed as data (see tools/untrusted.py)."""
    content = untrusted.tool_output_body(message.text.strip())
    return HumanMessage("Observation: " + untrusted.tool_output(message.name or tool, content,
                                                                error=message.status == "error"))


def as_text_messages(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    """The conversation for a text-only model: each tool call as an assistant step, its result as a user
    Observation framed as data (parallel calls one after another, matched by call id). Only the request is
    rendered this way; the state keeps the ordinary messages."""
    out: list[AnyMessage] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        i += 1
        if isinstance(message, AIMessage) and (calls := pending_calls(message)):
            results: dict[str, ToolMessage] = {}
            while i < len(messages) and isinstance(result_message := messages[i], ToolMessage):
                results[result_message.tool_call_id] = result_message
                i += 1
            thought = message.text.strip()
            for call in calls:
                out.append(AIMessage(_action_text(thought, call)))
                thought = ""
                if (result := results.pop(call.get("id") or "", None)) is not None:
                    out.append(_observation(result, call.get("name")))
            out += [_observation(orphan) for orphan in results.values()]
        elif isinstance(message, AIMessage):
            if answer := message.text.strip():
                out.append(AIMessage(f"Final Answer: {answer}"))
        elif isinstance(message, ToolMessage):
            out.append(_observation(message))
        else:
            out.append(message)
    return out


def answer_text(text: str) -> str:
    """The answer in a text-protocol reply written without tools (finalize): its Final Answer if labelled."""
    reply = parse_reply(text)
    return reply.final_answer or reply.thought or text.strip()



# --- loops cut ----------------------------------------------------------------------------------------------

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



# --- the format-error budget --------------------------------------------------------------------------------

FORMAT_ERROR = "format_error"  # the status of a record for an unusable reply


class Parsed(Protocol):
    @property
    def problem(self) -> str | None: ...


P = TypeVar("P", bound=Parsed)


@dataclass(frozen=True)
class FormatError:
    """One unusable reply: what the model wrote (loops cut), why it could not be read, the note sent back."""

    text: str
    problem: str
    correction: str
    tokens: int
    latency_ms: float


@dataclass
class Attempts(Generic[P]):
    """What the attempts came to: the usable reply (None when the budget ran out first) and each unusable one."""

    reply: AIMessage | None = None
    text: str = ""
    parsed: P | None = None
    errors: list[FormatError] = field(default_factory=list)

    def records(self, node: str, step: Callable[[int], int]) -> list[ExecutionStep]:
        """A `format_error` record per unusable reply; `step(i)` numbers the i-th."""
        return [make_step(step=step(i), node=node, status=FORMAT_ERROR, thought=error.text[:2000],
                          observation=error.correction, tokens=error.tokens, latency_ms=error.latency_ms)
                for i, error in enumerate(self.errors)]


def format_errors(state: Mapping[str, Any]) -> int:
    """The turn's unusable replies so far (its `format_error` records)."""
    return sum(1 for step in steps_of(state) if step["status"] == FORMAT_ERROR)


def corrections_left(state: Mapping[str, Any], max_format_errors: int) -> int:
    """How many more unusable replies this turn may have corrected (`max_format_errors` less those so far)."""
    return max(max_format_errors - format_errors(state), 0)


def read_reply(call: ModelCall, parse: Callable[[str], P], correction: Callable[[str], str], *, node: str,
               allowed: int, attempts: Attempts[P] | None = None) -> Generator[Request, Any, Attempts[P]]:
    """Make `call` (its messages, then with the latest correction after them) until `parse` finds no problem
    or `allowed` corrections are spent; returns `Attempts` (filled in as they happen into `attempts` when given:
    a caller keeps the unusable replies of a call that then fails).

    A node body's part (see driver.py): `attempts = yield from read_reply(...)`."""
    attempts = attempts if attempts is not None else Attempts()
    request: list[BaseMessage] = list(call.messages)
    asked = call
    while True:
        started = time.perf_counter()
        reply = (yield from asked).message or AIMessage("")
        text = without_repetition(str(reply.text))
        parsed = parse(text)
        if parsed.problem is None:
            attempts.reply, attempts.text, attempts.parsed = reply, text, parsed
            return attempts
        note = correction(parsed.problem)
        log_fallback(node, "format_correction", parsed.problem, level=logging.INFO)
        attempts.errors.append(FormatError(text, parsed.problem, note, tokens_of(reply),
                                           (time.perf_counter() - started) * 1000))
        if len(attempts.errors) > allowed:
            return attempts
        asked = replace(call, messages=[*request, AIMessage(prompts.TEXT_REPLY_STAND_IN),
                                        HumanMessage(f"Observation: {note}")])

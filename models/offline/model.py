"""OfflineChatModel: a scripted, deterministic chat model (not an LLM), so that every graph runs without a network.

It answers each kind of request the way any model is asked: tool calls for the next round with a Thought, a final
answer, a step of the text ReAct protocol, a numbered plan, or a structured reply. A request that binds a tool whose
schema is a reflection verdict's (the product's `reflection="inline"`) gets that verdict called once beside the
step's tool calls or answer, read from the request's structure as any model reads it. Its noisy variant measures a
graph's recovery from model mistakes instead of assuming it: with a seeded probability a reply's tool call goes
wrong (a tool that does not exist, the wrong built-in tool, malformed arguments). Its spec is `offline-noisy:<p>` or
`offline:noisy=<p>` with p in [0, 1], optionally followed by `@<seed>`, and whether a reply is perturbed is drawn
from `Random(f"{seed}|{question}|{round}")`: the same seed, question and point in the turn give the same mistake,
independent of timing or of other runs.
"""

from __future__ import annotations

import copy
import functools
import json
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from reactgraph.models.loader import ModelConfigError
from reactgraph.models.purpose import max_steps_of, plan_steps_of, purpose_of, verdict_block_of
from reactgraph.models.token_estimate import estimate_tokens, usage_for

from .answer import final_answer, thought
from .conversation import (
    Turn,
    as_tool_messages,
    is_text_protocol,
    read_turn,
    recall_reply,
    render_action,
    render_final,
    render_plan,
    unframed,
)
from .planner import BUILTIN_TOOLS, make_plan
from .structured import reflection_args, responder_for

# A verdict's schema: whether the results suffice, and the question's parts and those missing (the loop's own
# flags — tool_error, repeated_call … — may ride along, or come from the records).
VERDICT_FIELDS = frozenset({"enough_information", "parts", "missing"})


def verdict_tools(tools: Sequence[dict[str, Any]]) -> dict[str, frozenset[str]]:
    """The bound tools whose parameters are a reflection verdict's, each with its fields."""
    found = {}
    for tool in tools:
        function = tool.get("function") or tool
        properties = (function.get("parameters") or {}).get("properties") or {}
        if isinstance(properties, dict) and set(properties) >= VERDICT_FIELDS:
            found[str(function.get("name", ""))] = frozenset(properties)
    return found


def with_block(reply: AIMessage, messages: Sequence[BaseMessage], fields: frozenset[str]) -> AIMessage:
    """A text-protocol reply that begins with the verdict block asked for (its `fields` filled in)."""
    args = {key: value for key, value in reflection_args(messages).items() if key in fields}
    block = json.dumps(args, ensure_ascii=False)
    return AIMessage(content=f"<reflection>{block}</reflection>\n{reply.text}")


def with_call(reply: AIMessage, messages: Sequence[BaseMessage], name: str, fields: frozenset[str],
              call_id: str) -> AIMessage:
    """The reply with one call of the verdict tool `name` (its own `fields` filled in) beside its tool calls (or
    its answer)."""
    args = {key: value for key, value in reflection_args(messages).items() if key in fields}
    reply.tool_calls = [*reply.tool_calls, {"name": name, "args": args, "id": call_id, "type": "tool_call"}]
    return reply


MODEL_NAME = "offline-scripted"


@functools.lru_cache(maxsize=256)
def _class_as_tool(schema: type) -> dict[str, Any]:
    """A schema class (a structured answer's, a check's) as an OpenAI tool, made once per class: each structured
    request binds its class again, and making its JSON schema costs ≈ 1 ms."""
    return convert_to_openai_tool(schema)


def _tool_name(tool: dict[str, Any]) -> str:
    return tool.get("function", {}).get("name") or tool.get("name", "")


def _parameters(tools: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    """The JSON schema of the bound tool `name` (a caller's response_format, forced as the one tool to call)."""
    return next((t.get("function", {}).get("parameters") for t in tools if _tool_name(t) == name), None)


def _forced_schema(tool_names: list[str], tool_choice: Any) -> str | None:
    """The schema a structured-output call forces (tool_choice any/required/its name); None for real tools."""
    if isinstance(tool_choice, dict):
        tool_choice = tool_choice.get("function", {}).get("name") or tool_choice.get("name")
    forced = None
    if tool_choice in ("any", "required", True) and len(tool_names) == 1:
        forced = tool_names[0]
    elif isinstance(tool_choice, str) and tool_choice in tool_names:
        forced = tool_choice
    if forced is None or forced in BUILTIN_TOOLS:
        return None
    return forced


def _before_request(messages: list[BaseMessage]) -> list[BaseMessage]:
    """The conversation without a request the caller appended as a human message after the tool round (it is
    not the user's question)."""
    while (len(messages) >= 2 and isinstance(messages[-1], HumanMessage)
           and (isinstance(messages[-2], ToolMessage)
                or (isinstance(messages[-2], AIMessage) and messages[-2].tool_calls))):
        messages = messages[:-1]
    return messages


def _call_ids(turn: Turn, count: int) -> list[str]:
    """Ids f"call_{n}_{k}", n = tool calls earlier in the conversation: deterministic and never reused."""
    n = turn.prior_calls
    while any(f"call_{n}_{k}" in turn.used_ids for k in range(count)):
        n += 1
    return [f"call_{n}_{k}" for k in range(count)]


def _cut_to(reply: AIMessage, limit: int | None) -> bool:
    """Cut the reply's text to `limit` estimated tokens (tool calls stay whole); whether it was cut."""
    text = reply.content if isinstance(reply.content, str) else ""
    if not limit or estimate_tokens(text) <= limit:
        return False
    words = re.findall(r"\s*\S+", text)
    kept, used = [], 0
    for word in words:
        used += estimate_tokens(word)
        if used > limit:
            break
        kept.append(word)
    reply.content = "".join(kept)
    return True


class OfflineChatModel(BaseChatModel):
    """Scripted offline chat model — deterministic rules, NOT a language model.

    It reads what any model reads: the conversation (the question, earlier questions, tool results), the tools
    bound and the schema of a structured reply, the stop sequences, and the request's purpose from its run
    metadata (models/purpose.py), never the wording of a prompt. It decomposes a question into sub-tasks for
    the built-in tools (calculator, get_time, get_weather, search, http_get), calls only tools that are bound,
    reads the observations of the current turn, falls back when a tool fails, and answers in the question's
    language. With no tools bound it composes the best answer from the observations so far and says what is
    missing. Questions outside the tools get an honest "cannot answer offline". A structured reply is answered
    by the request's purpose (a reflection verdict, a plan, an evaluation, …) or, without one it knows, from
    the schema's fields by type. Called with stop=["Observation:"] it speaks the text ReAct protocol (Thought /
    Action / Action Input, or Final Answer); asked for a plan with no schema, it writes the plan as a numbered
    list. Same request in, same message out.
    """

    model_name: str = MODEL_NAME
    max_tokens: int | None = None  # a reply longer than this is cut there, finish_reason "length", as a server does

    @property
    def _llm_type(self) -> str:
        return MODEL_NAME

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name}

    def bind_tools(self, tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool], *,
                   tool_choice: str | None = None, **kwargs: Any) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools (any form LangChain converts to an OpenAI tool schema); only these may be called."""
        formatted = [copy.deepcopy(_class_as_tool(tool)) if isinstance(tool, type) else convert_to_openai_tool(tool)
                     for tool in tools]
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=formatted, **kwargs)

    def with_structured_output(self, schema: Any, *, include_raw: bool = False,
                               **kwargs: Any) -> Runnable[LanguageModelInput, Any]:
        """Structured output (the schema as the one tool to call), answered by the request's purpose."""
        return super().with_structured_output(schema, include_raw=include_raw, **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, tools: list[dict[str, Any]] | None = None,
                  tool_choice: Any = None, **kwargs: Any) -> ChatResult:
        purpose = purpose_of(run_manager)
        tool_names = [_tool_name(t) for t in tools or []]
        forced = _forced_schema(tool_names, tool_choice)
        normalized = as_tool_messages(unframed(messages))
        if goals := plan_steps_of(run_manager):  # a plan step: work on the goals so far, as a question of their own
            normalized = _asking(normalized, "\n".join(goals))
        limit = max_steps_of(run_manager)
        if forced is not None:
            reply = self._structured(normalized, forced, purpose, _parameters(tools or [], forced), limit)
        elif purpose in ("plan", "replan"):  # a plan asked for with no schema: the same plan, as a numbered list
            reply = AIMessage(content=render_plan(responder_for(purpose, None, limit)(_before_request(normalized))))
        elif is_text_protocol(stop):  # the text protocol binds no tools: the built-in ones are its reach
            reply = self._text_step(normalized, set(tool_names) if tools else set(BUILTIN_TOOLS))
            if block := verdict_block_of(run_manager):  # the verdict asked for, as the block it begins with
                reply = with_block(reply, normalized, frozenset(block))
        else:  # a verdict schema offered beside the tools is filled in beside the step
            verdicts = verdict_tools(tools or [])
            reply = self._tool_step(normalized, set(tool_names) - set(verdicts) if tools else None)
            if verdicts:
                call_id = _call_ids(read_turn(normalized), len(reply.tool_calls) + 1)[-1]
                name, verdict_fields = next(iter(verdicts.items()))
                reply = with_call(reply, normalized, name, verdict_fields, call_id)
        return self._result(messages, reply, tools, kwargs.get("max_tokens") or self.max_tokens)

    def _result(self, messages: list[BaseMessage], reply: AIMessage, tools: list[dict[str, Any]] | None,
                limit: int | None) -> ChatResult:
        cut = _cut_to(reply, limit)
        reply.usage_metadata = usage_for(messages, reply, tools)
        # Where providers put them, so that tracing instrumentations read model name and finish reason
        finish = "length" if cut else "tool_calls" if reply.tool_calls else "stop"
        reply.response_metadata = {"model_name": self.model_name, "finish_reason": finish}
        return ChatResult(generations=[ChatGeneration(message=reply, generation_info={"finish_reason": finish})],
                          llm_output={"model_name": self.model_name})

    @staticmethod
    def _structured(messages: list[BaseMessage], schema: str, purpose: str | None,
                    parameters: dict[str, Any] | None = None, limit: int | None = None) -> AIMessage:
        args = responder_for(purpose, parameters, limit)(_before_request(messages))
        call_id = _call_ids(read_turn(messages), 1)[0]
        return AIMessage(content="", tool_calls=[{"name": schema, "args": args, "id": call_id, "type": "tool_call"}])

    def _tool_step(self, messages: list[BaseMessage], tools: set[str] | None) -> AIMessage:
        recalled = recall_reply(messages)
        if recalled is not None:
            return AIMessage(content=recalled)
        turn = read_turn(messages)
        plan = make_plan(turn, tools)
        lang = plan.question.lang
        if not plan.calls:
            return AIMessage(content=final_answer(plan, lang))
        ids = _call_ids(turn, len(plan.calls))
        return AIMessage(content=thought(plan, lang), tool_calls=[
            {"name": call.name, "args": dict(call.args), "id": call_id, "type": "tool_call"}
            for call, call_id in zip(plan.calls, ids, strict=True)])

    def _text_step(self, messages: list[BaseMessage], tools: set[str]) -> AIMessage:
        """Text ReAct protocol: one Action per step (the first planned call), or the Final Answer."""
        recalled = recall_reply(messages)
        if recalled is not None:
            return AIMessage(content=render_final(recalled, read_turn(messages).lang))
        plan = make_plan(read_turn(messages), tools)
        lang = plan.question.lang
        if not plan.calls:
            return AIMessage(content=render_final(final_answer(plan, lang), lang))
        first = replace(plan, calls=plan.calls[:1])
        call = first.calls[0]
        return AIMessage(content=render_action(thought(first, lang), call.name, dict(call.args)))


def _asking(messages: list[BaseMessage], question: str) -> list[BaseMessage]:
    """The messages with the question (the last human message) replaced: a plan step's goals so far, where an
    earlier goal keeps the subject that a later one refers back to ("how many years since then?")."""
    last = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=None)
    if last is None:
        return messages
    return [*messages[:last], HumanMessage(question, id=messages[last].id), *messages[last + 1:]]


NOISY_MODEL_NAME = "offline-noisy"
# Names a model might plausibly invent for each built-in tool.
HALLUCINATED = {"calculator": "python_eval", "get_time": "current_time", "get_weather": "weather_api",
                "search": "web_search", "http_get": "browse"}
# The wrong (but real) tool a confused model might reach for.
WRONG_TOOL = {"calculator": "search", "get_time": "get_weather", "get_weather": "search", "search": "calculator",
              "http_get": "search"}
MISTAKES = ("unknown_tool", "wrong_tool", "bad_args")
_SPEC = re.compile(r"^offline(?:-noisy:|:noisy=)(?P<p>[^@]+)(?:@(?P<seed>.+))?$")


def parse_noisy_spec(spec: str) -> tuple[float, str] | None:
    """(noise, seed) of a noisy spec; None for any other spec. A bad probability is a ModelConfigError."""
    match = _SPEC.match((spec or "").strip())
    if not match:
        return None
    try:
        noise = float(match.group("p"))
    except ValueError:
        noise = -1.0
    if not 0.0 <= noise <= 1.0:
        raise ModelConfigError(f"noisy offline model: the probability in {spec!r} must be a number from 0 to 1")
    return noise, (match.group("seed") or "0")


def perturb(call: dict[str, Any], rng: random.Random) -> tuple[str, dict[str, Any]]:
    """One tool call gone wrong: (kind of mistake, the call as the model now makes it)."""
    name, args = call["name"], dict(call.get("args") or {})
    kind = rng.choice(MISTAKES)
    if kind == "unknown_tool":
        return kind, {**call, "name": HALLUCINATED.get(name, f"{name}_v2")}
    if kind == "wrong_tool":
        return kind, {**call, "name": WRONG_TOOL.get(name, "search")}
    if args and rng.random() < 0.5:  # a misspelt parameter name
        key = min(args)
        args[f"{key}_name" if not key.endswith("_name") else "value"] = args.pop(key)
    else:  # the arguments left out altogether
        args = {}
    return kind, {**call, "args": args}


class NoisyOfflineChatModel(OfflineChatModel):
    """Scripted offline model with seeded tool-call mistakes (NOT an LLM; for robustness measurements)."""

    model_name: str = NOISY_MODEL_NAME
    noise: float = 0.2
    seed: str = "0"

    @property
    def _llm_type(self) -> str:
        return NOISY_MODEL_NAME

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name, "noise": self.noise, "seed": self.seed}

    def reseeded(self, seed: Any) -> NoisyOfflineChatModel:
        """The same model with another seed (e.g. one per eval run)."""
        return self.model_copy(update={"seed": str(seed)})

    def _rng(self, messages: list[BaseMessage]) -> random.Random:
        turn = read_turn(messages)
        return random.Random(f"{self.seed}|{turn.question}|{turn.rounds}|{len(turn.history)}")

    def _tool_step(self, messages: list[BaseMessage], tools: set[str] | None) -> AIMessage:
        reply = super()._tool_step(messages, tools)
        if not reply.tool_calls:
            return reply
        rng = self._rng(messages)
        if rng.random() >= self.noise:
            return reply
        calls: list[dict[str, Any]] = [dict(call) for call in reply.tool_calls]
        index = rng.randrange(len(calls))
        _, calls[index] = perturb(calls[index], rng)
        return AIMessage(content=reply.content, tool_calls=calls)

    def _text_step(self, messages: list[BaseMessage], tools: set[str]) -> AIMessage:
        reply = super()._text_step(messages, tools)
        text = reply.content if isinstance(reply.content, str) else ""
        action = re.search(r"^Action: *(?P<name>\S+)\nAction Input: *(?P<input>.*)$", text, re.MULTILINE)
        if not action:
            return reply
        rng = self._rng(messages)
        if rng.random() >= self.noise:
            return reply
        try:
            args = json.loads(action.group("input"))
        except (ValueError, RecursionError):
            args = {}
        _, call = perturb({"name": action.group("name"), "args": args if isinstance(args, dict) else {}}, rng)
        rendered = f"Action: {call['name']}\nAction Input: {json.dumps(call['args'], ensure_ascii=False)}"
        return AIMessage(content=text[:action.start()] + rendered + text[action.end():])


def offline_model(spec: str = "offline") -> OfflineChatModel:
    """The scripted model for `offline`, or its noisy variant for `offline-noisy:<p>` / `offline:noisy=<p>`."""
    parsed = parse_noisy_spec(spec)
    if parsed is None:
        return OfflineChatModel()
    noise, seed = parsed
    return NoisyOfflineChatModel(noise=noise, seed=seed)

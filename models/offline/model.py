"""OfflineChatModel: a scripted, deterministic chat model (not an LLM) so every graph runs without a network."""

from __future__ import annotations

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

from reactgraph.models.purpose import plan_steps_of, purpose_of
from reactgraph.models.token_estimate import estimate_tokens, usage_for

from .answer import final_answer
from .conversation import Turn, read_turn
from .data_blocks import unframed
from .describe import thought
from .inline import verdict_tools, with_call
from .planner import BUILTIN_TOOLS, make_plan
from .recall import recall_reply
from .structured import RESPONDERS, responder_for
from .textproto import as_tool_messages, is_text_protocol, render_action, render_final, render_plan

MODEL_NAME = "offline-scripted"


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
        formatted = [convert_to_openai_tool(tool) for tool in tools]
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
        if forced is not None:
            reply = self._structured(normalized, forced, purpose, _parameters(tools or [], forced))
        elif purpose in ("plan", "replan"):  # a plan asked for with no schema: the same plan, as a numbered list
            reply = AIMessage(content=render_plan(RESPONDERS[purpose](_before_request(normalized))))
        elif is_text_protocol(stop):  # the text protocol binds no tools: the built-in ones are its reach
            reply = self._text_step(normalized, set(tool_names) if tools else set(BUILTIN_TOOLS))
        else:  # a verdict schema offered beside the tools is filled in beside the step
            verdicts = verdict_tools(tools or [])
            reply = self._tool_step(normalized, set(tool_names) - set(verdicts) if tools else None)
            if verdicts:
                call_id = _call_ids(read_turn(normalized), len(reply.tool_calls) + 1)[-1]
                reply = with_call(reply, normalized, verdicts[0], call_id)
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
                    parameters: dict[str, Any] | None = None) -> AIMessage:
        args = responder_for(purpose, parameters)(_before_request(messages))
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

"""How the scripted model reads a failed call: what kind of failure it was, an honest reason in the user's words,
and what a capable agent does next — try a passing fault once more, stop calling a tool that failed for good.

A result carries its ToolStatus when the gateway gave one (the tools protocol's tool messages); the text protocol's
observations do not, and their failure is read from the gateway's wording (tools/untrusted.py).
"""

from __future__ import annotations

import re

from .conversation import Call, Observation, Turn

# How the gateway words each failing ToolStatus (tools/untrusted.py), for results that carry no status (the
# text protocol's observations): the status the text was written for.
_GATEWAY_TEXTS = (
    (r"Tool \S+ is temporarily unavailable \(circuit open", "circuit_open"),
    (r"Tool \S+ (?:timed out after|is not responding)", "timeout"),
    (r"Tool \S+ is busy: no free slot", "rate_limited"),
    (r"Invalid arguments for ", "invalid_args"),
    (r"Unknown tool |Tool '[^']*' is disabled", "unknown_tool"),
    (r"Tool \S+ was not run: the call was rejected at the approval step", "rejected"),
    (r"Tool '[^']*' is not permitted", "denied"),
    (r"Tool \S+ failed", "error"),
    (r"No result was returned", "no_result"),
)
# Loose wording of other sources (a framed error block, a provider's text), tried when the gateway's is absent.
_LOOSE_TEXTS = (
    (r"circuit open", "circuit_open"), (r"timed out|timeout", "timeout"), (r"invalid arguments", "invalid_args"),
    (r"unknown tool|is disabled", "unknown_tool"), (r"rate limit|too many requests|is busy|concurrency limit",
                                                    "rate_limited"),
    (r"denied|not permitted|permission", "denied"),
)
# An error the retry policy treats as passing (TransientToolError): a 5xx/429, an unreachable host, a blip.
_TRANSIENT = re.compile(r"temporarily unavailable|\b(?:429|502|503|504)\b|unreachable|network error|"
                        r"connection (?:reset|refused|aborted|error)|timed out|try again later", re.I)
_REASONS = {
    "timeout": ("工具超时", "the tool timed out"),
    "circuit_open": ("工具暂时不可用（熔断中：连续失败后暂停调用）",
                     "the tool is temporarily unavailable (circuit open after repeated failures)"),
    "rate_limited": ("工具繁忙（并发已满）", "the tool is busy (concurrency limit)"),
    "invalid_args": ("参数无效", "invalid arguments"),
    "unknown_tool": ("工具不存在或已停用", "the tool does not exist or is disabled"),
    "denied": ("没有权限", "permission denied"),
    "no_result": ("没有返回结果", "no result was returned"),
    "rejected": ("审批人拒绝了这次调用", "a person rejected the call at the approval step"),
}
# What the person said when rejecting, as the gateway's answer to a rejected call carries it (tools/untrusted.py).
_PERSON_SAID = re.compile(r"rejected at the approval step: (?P<words>.+?)\. Do not call it again", re.S)
REJECTED_BEFORE = ("审批人在之前的尝试中拒绝了这次调用", "a person rejected this call in an earlier attempt")


def failure_kind(content: str, status: str = "", attempts: int = 0) -> str:
    """Why a call failed, as a ToolStatus value (plus "transient" and "no_result"): the status the result
    carries, else the status the gateway's wording was written for; an error that was retried, or reads as
    a passing fault, is "transient"."""
    text = content.strip()
    kind = status if status in (*_REASONS, "error") else ""
    for pattern, named in _GATEWAY_TEXTS if not kind else ():
        if re.match(pattern, text):
            kind = named
            break
    for pattern, named in _LOOSE_TEXTS if not kind else ():
        if re.search(pattern, text, re.I):
            kind = named
            break
    if kind in ("", "error") and (attempts > 1 or _TRANSIENT.search(text)):
        return "transient"
    return kind or "error"


def failure_reason(content: str, lang: str, status: str = "", attempts: int = 0) -> str:
    """A short, honest label for why a tool call failed, following its status (see `failure_kind`)."""
    zh = lang == "zh"
    kind = failure_kind(content, status, attempts)
    if kind == "rejected" and (said := _PERSON_SAID.search(content)):  # the person's own words, as the result says
        words = " ".join(said.group("words").split())[:200]
        return f"{_REASONS[kind][0]}：{words}" if zh else f"{_REASONS[kind][1]}: {words}"
    if kind in _REASONS:
        return _REASONS[kind][0 if zh else 1]
    first = content.strip().splitlines()[0] if content.strip() else ""
    detail = re.sub(r"^Tool \S+ failed:\s*", "", first)
    detail = detail if len(detail) <= 100 else detail[:100].rsplit(" ", 1)[0] + "…"
    tried = (f"，{attempts} 次尝试都失败" if zh else f", {attempts} attempts failed") if attempts > 1 else ""
    if kind == "transient":
        label = ("工具临时故障" if zh else "the tool had a transient error") + tried
    else:
        label = "工具调用失败" if zh else "the tool call failed"
    return (f"{label}：{detail}" if zh else f"{label}: {detail}") if detail else label




def broken_tools(turn: Turn) -> set[str]:
    """Tools that failed for good (an error that is not a passing fault) on two different calls this turn and
    never worked: a capable agent stops trying them with other arguments."""
    failed: dict[str, set[Call]] = {}
    worked: set[str] = set()
    for o in turn.observations:
        if o.ok:
            worked.add(o.call.name)
        elif failure_kind(o.content, o.status, o.attempts) == "error":
            failed.setdefault(o.call.name, set()).add(o.call)
    return {name for name, calls in failed.items() if len(calls) >= 2 and name not in worked}




def worth_another_try(observation: Observation, turn: Turn) -> bool:
    """A passing fault that nobody retried yet (the gateway made one attempt, the call was made once): a
    capable agent tries the same call again before falling back to another way."""
    if observation.ok or observation.attempts > 1:
        return False
    if failure_kind(observation.content, observation.status) != "transient":
        return False
    return sum(o.call == observation.call for o in turn.observations) == 1


def tools_to_avoid(turn: Turn) -> list[str]:
    """The tools to avoid from now on: those that failed this turn for a reason that will not pass (a passing
    fault is worth another try) and have not worked since."""
    failed: set[str] = set()
    for o in turn.observations:
        if o.ok:
            failed.discard(o.call.name)
        elif failure_kind(o.content, o.status, o.attempts) != "transient":
            failed.add(o.call.name)
    return sorted(failed)

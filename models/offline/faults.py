"""Why a tool call failed, in the user's words: the label follows the result's status (timeout, transient
error, busy, circuit open, invalid arguments, …), never one cause for every failure."""

from __future__ import annotations

import re

# How the gateway words each failing ToolStatus (tools/untrusted.py), for results that carry no status (the
# text protocol's observations): the status the text was written for.
_GATEWAY_TEXTS = (
    (r"Tool \S+ is temporarily unavailable \(circuit open", "circuit_open"),
    (r"Tool \S+ (?:timed out after|is not responding)", "timeout"),
    (r"Tool \S+ is busy: no free slot", "rate_limited"),
    (r"Invalid arguments for ", "invalid_args"),
    (r"Unknown tool |Tool '[^']*' is disabled", "unknown_tool"),
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
}


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

"""Words for what the model does: the Thought before a round of calls and labels for what is still missing."""

from __future__ import annotations

import re

from . import derive
from .conversation import Call
from .planner import Plan, TaskState
from .question import Task
from .rag import describe as describe_rag_call
from .vocabulary import word_list

_ZH_VERB_EN: dict[str, str] = word_list("verbs_zh_en")

def verb_en(verb: str) -> str:
    return _ZH_VERB_EN.get(verb, verb.lower() if verb.isascii() else "created")


def verb_zh(verb: str) -> str:
    if not verb.isascii():
        return verb
    return {"born": "出生", "founded": "成立", "established": "成立", "invented": "发明"}.get(verb.lower(), "发布")


def join(items: list[str], lang: str) -> str:
    """A、B和C / A, B and C."""
    items = [i for i in items if i]
    if len(items) <= 1:
        return "".join(items)
    if lang == "zh":
        return "、".join(items[:-1]) + "和" + items[-1]
    return ", ".join(items[:-1]) + " and " + items[-1]


def who_phrase(task: Task, lang: str) -> str:
    """"苹果公司的现任 CEO" / "the CEO of Apple": the who-question without its question words."""
    clause = task.params.get("clause", "")
    if lang == "zh":
        text = re.sub(r"叫什么名字|叫什么|是谁|谁是|是哪位|名字|请问|吗|呢|[?？]", "", clause).strip()
        return text or task.params["query"]
    text = re.sub(r"^(?:who|what)(?:'s|\s+is|\s+was|\s+are)\s+|^what(?:'s| is) the name of\s+", "", clause, flags=re.I)
    return text.strip(" ?") or task.params["query"]


def spaced(text: str) -> str:
    """Text followed by a space when it ends in a Latin letter or digit, before Chinese text follows."""
    return f"{text} " if text and text[-1].isascii() and text[-1].isalnum() else text


def subject_name(plan: Plan, lang: str) -> str:
    """Who or what the chain is about: the person the who-step found, else the subject the user named."""
    person = plan.value("who")
    if person is not None:
        return person.alt if lang == "zh" and person.alt else person.name
    origin = plan.question.task("origin")
    return origin.params.get("subject", "") if origin else ""


def label(state: TaskState, plan: Plan, lang: str) -> str:
    """What a task would have told the user: used for "still missing: …"."""
    task, p, zh = state.task, state.task.params, lang == "zh"
    subject = subject_name(plan, lang) or ("他" if zh else "the person")
    if task.kind == "weather":
        if not p["city"]:
            return "天气（没有指定城市）" if zh else "the weather (no city named)"
        return f"{p['city']}的天气" if zh else f"the weather in {p['city']}"
    if task.kind == "time":
        if p.get("city"):
            return f"{p['city']}的当前时间" if zh else f"the current time in {p['city']}"
        return "当前时间" if zh else "the current time"
    if task.kind == "calc":
        return f"{p['expression']} 的计算结果" if zh else f"the result of {p['expression']}"
    if task.kind == "fact":
        return f"关于“{p['query']}”的资料" if zh else f'information about "{p["query"]}"'
    if task.kind == "who":
        return f"{who_phrase(task, lang)}是谁" if zh else f"who {who_phrase(task, lang)} is"
    if task.kind == "origin":
        if p["birth"]:
            return f"{spaced(subject)}的出生日期" if zh else f"{subject}'s date of birth"
        return f"{subject}{verb_zh(p['verb'])}的年份" if zh else f"the year {subject} was {verb_en(p['verb'])}"
    if task.kind == "now":
        return "当前日期（今年的年份）" if zh else "the current date (this year)"
    if task.kind == "elapsed":
        if p["age"]:
            return f"{subject}的年龄" if zh else f"{subject}'s age"
        return "经过的年数" if zh else "the number of years since then"
    if task.kind == "accumulate":
        return f"累计的{p['unit'] or '总数'}" if zh else f"the total {p['unit'] or 'amount'}"
    if task.kind == "http":
        return f"{p['url']} 的内容" if zh else f"the content of {p['url']}"
    if task.kind == "diff":
        return derive.diff_label(task, lang)
    if task.kind == "vs":
        return derive.vs_label(task, lang)
    return task.key


def missing_reason(state: TaskState, lang: str) -> str:
    zh = lang == "zh"
    if state.reason(lang):
        return state.reason(lang)
    if state.status == "waiting" or (state.status == "failed" and state.task.needs):
        return "缺少前置信息" if zh else "it depends on information that is missing"
    return "尚未查询" if zh else "not looked up yet"


def describe_call(call: Call, task: Task, lang: str) -> str:
    zh, args = lang == "zh", call.args
    if call.name == "get_weather":
        return f"查询{args.get('city')}的天气" if zh else f"look up the weather in {args.get('city')}"
    if call.name == "get_time":
        if task.kind == "now":
            return "获取当前日期以确定今年的年份" if zh else "get the current date to know the current year"
        city = task.params.get("city")
        if city:
            return f"查询{city}的当前时间" if zh else f"get the current time in {city}"
        return "获取当前时间" if zh else "get the current time"
    if call.name == "calculator":
        return f"用计算器计算 {args.get('expression')}" if zh else f"calculate {args.get('expression')}"
    if call.name == "http_get":
        return f"获取网页 {args.get('url')}" if zh else f"fetch {args.get('url')}"
    if call.name == "rag_search":
        return describe_rag_call(call, lang)
    purpose = {"who": ("以确定是谁", "to find out who it is"),
               "origin": ("以确定日期", "to find the date"),
               "weather": ("作为天气数据的替代来源", "as a fallback source for the weather")}.get(task.kind, ("", ""))
    query, top = args.get("query"), args.get("top_k")
    if zh:
        return f"搜索“{query}”{f'（取前 {top} 条）' if top else ''}{purpose[0]}"
    return f'search for "{query}"' + (f" (top {top})" if top else "") + (f" {purpose[1]}" if purpose[1] else "")


def thought(plan: Plan, lang: str) -> str:
    """The sentence shown as the Thought of a tool-calling step: what the next calls are for."""
    zh = lang == "zh"
    fresh: list[tuple[Call, Task]] = []
    retries: list[str] = []
    seen: set[Call] = set()
    for state in plan.states.values():
        call = state.next_call
        if call is None or call not in plan.calls or call in seen:
            continue
        seen.add(call)
        if state.failures and state.failures[-1][0].name:
            failed_call, why = state.failures[-1]
            before = describe_call(failed_call, state.task, lang)
            after = describe_call(call, state.task, lang)
            if why.endswith(("工具未提供", "is not available")):
                retries.append(f"无法{before}（{why}），改为{after}。" if zh
                               else f"I cannot {before} ({why}); I will {after} instead.")
            else:
                retries.append(f"上一次{before}没有成功（{why}），改为{after}。" if zh
                               else f"The previous attempt to {before} did not work ({why}); I will {after} instead.")
        else:
            fresh.append((call, state.task))
    weather = [c.args.get("city", "") for c, _ in fresh if c.name == "get_weather"]
    cities = join(weather, lang)
    parts = [f"查询{cities}的天气" if zh else f"look up the weather in {cities}"] if weather else []
    parts += [describe_call(c, t, lang) for c, t in fresh if c.name != "get_weather"]
    sentence = ""
    if parts:
        then = ""
        if weather and plan.question.compare:
            then = "，然后比较温度" if zh else ", then compare the temperatures"
        waiting = any(s.status == "waiting" and s.task.kind in ("elapsed", "accumulate", "diff", "vs")
                      for s in plan.states.values())
        if waiting and not then:
            then = "，之后再计算结果" if zh else ", then work out the result"
        sentence = (f"需要{'，并'.join(parts)}{then}。" if zh
                    else f"I need to {'; '.join(parts)}{then}.")
    if zh:
        return "".join(retries) + sentence
    return " ".join(part for part in (*retries, sentence) if part)

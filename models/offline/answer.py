"""What the scripted offline model says about its work: the Thought before a round of calls, and the final answer.

The Thought names what the next calls are for, and when a call failed it says so and what it tries instead. The
final answer is composed from what the sub-tasks found, in the question's language: the weather of each city and
which is hotter or colder, the time, a calculation and its result, a fact with its source, a chain's person, date
and elapsed years. It then says honestly what is still missing and why, each missing part named by what it would
have told the user, and a question that no built-in tool can help with gets a plain "cannot answer offline" that
points to configuring a real model rather than a guess.
"""

from __future__ import annotations

import re
from typing import Any

from .compute import diff_label, diff_line, format_number, vs_label, vs_line
from .conversation import Call, is_passthrough, passthrough_line
from .planner import Plan, TaskState, describe_rag_call
from .question import Task
from .words import DateFact, current_date, find_person, role_of, word_list

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
        return diff_label(task, lang)
    if task.kind == "vs":
        return vs_label(task, lang)
    if task.kind == "call":
        return f"{p['tool']} 的结果" if zh else f"the result of {p['tool']}"
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


_WEEKDAYS_ZH: dict[str, str] = word_list("weekdays_zh")

def cannot_answer(lang: str) -> str:
    """The honest reply to a question no built-in tool can help with."""
    if lang == "zh":
        return ("抱歉，我是离线脚本模型（offline-scripted，不是大语言模型），只会用内置工具处理时间、天气、计算、"
                "知识库搜索和网页获取这类问题，无法离线回答这个问题，也不会凭空猜测。如需回答此类问题，请配置真实模型："
                "设置环境变量 REACTGRAPH_MODEL（例如 openai:gpt-4o-mini）并提供 OPENAI_API_KEY。")
    return ("Sorry — I am the scripted offline model (offline-scripted, not an LLM). I can only use the built-in tools "
            "for time, weather, arithmetic, knowledge-base search and fetching URLs, so I cannot answer this offline "
            "and will not guess. To answer questions like this, configure a real model: set REACTGRAPH_MODEL "
            "(e.g. openai:gpt-4o-mini) and OPENAI_API_KEY.")


def _num(value: Any) -> str:
    return format_number(value)


def _source(src: str, lang: str) -> str:
    if not src:
        return ""
    return f"（来源：{src}）" if lang == "zh" else f" (source: {src})"


def _weather_line(data: dict[str, Any], city: str, lang: str) -> str:
    zh = lang == "zh"
    if data.get("via_search"):
        return (f"{city}：根据搜索结果，{data.get('snippet')}{_source(data.get('source', ''), lang)}" if zh
                else f"{city}: according to a search, {data.get('snippet')}{_source(data.get('source', ''), lang)}")
    if data.get("found") is False:
        cities = [str(c) for c in data.get("known_cities") or []][:10]
        known = "、".join(cities) if zh else ", ".join(cities)
        extra = (f"（有数据的城市包括：{known}）" if zh else f" (cities with data: {known})") if known else ""
        return f"没有{city}的天气数据{extra}" if zh else f"No weather data for {city}{extra}"
    humidity = data.get("humidity")
    humidity = f"{_num(humidity)}%" if isinstance(humidity, (int, float)) else (humidity or "")
    parts = [str(data.get("condition") or ""), f"{_num(data.get('temperature_c'))}°C" if data.get(
        "temperature_c") is not None else ""]
    if zh:
        parts = [parts[0], f"气温 {parts[1]}" if parts[1] else "", f"湿度 {humidity}" if humidity else "",
                 str(data.get("wind") or "")]
        return f"{data.get('city') or city}：{'，'.join(p for p in parts if p)}{_source(data.get('source', ''), lang)}"
    wind = str(data.get("wind") or "")
    wind = wind if not wind or "wind" in wind.lower() else f"wind {wind}"
    parts += [f"humidity {humidity}" if humidity else "", wind]
    return f"{data.get('city') or city}: {', '.join(p for p in parts if p)}{_source(data.get('source', ''), lang)}"


def _comparison(plan: Plan, lang: str) -> str:
    zh, hot = lang == "zh", plan.question.compare == "hot"
    temps: list[tuple[str, float]] = []
    lacking: list[str] = []
    for state in plan.states.values():
        if state.task.kind != "weather":
            continue
        value = state.value if state.status == "done" else None
        t = value.get("temperature_c") if isinstance(value, dict) else None
        if isinstance(t, (int, float)) and not isinstance(t, bool):
            temps.append((state.task.params["city"], float(t)))
        else:
            lacking.append(state.task.params["city"])
    if len(temps) < 2:
        return (f"无法比较哪个城市更{'热' if hot else '冷'}：缺少{join(lacking, lang)}的气温数据。" if zh
                else f"I cannot say which city is {'warmer' if hot else 'colder'}: no temperature for "
                     f"{join(lacking, lang)}.")
    ranked = sorted(temps, key=lambda ct: -ct[1] if hot else ct[1])
    best = [c for c, t in ranked if t == ranked[0][1]]
    word = ("更热" if len(temps) == 2 else "最热") if hot else ("更冷" if len(temps) == 2 else "最冷")
    en_word = {True: "warmer" if "warm" in plan.question.text.lower() else "hotter", False: "colder"}[hot]
    missing = join(lacking, lang)
    note = ""
    if lacking:
        note = f"（{missing}没有气温数据，未参与比较）" if zh else f" ({missing}: no data, not compared)"
    if len(best) == len(temps):
        same = "热" if hot else "冷"
        return (f"{join(best, lang)}的气温相同（都是 {_num(ranked[0][1])}°C），一样{same}。{note}" if zh
                else f"{join(best, lang)} have the same temperature ({_num(ranked[0][1])}°C).{note}")
    if len(best) > 1:
        return (f"{join(best, lang)}并列{word}（{_num(ranked[0][1])}°C）。{note}" if zh
                else f"{join(best, lang)} are equally {en_word} ({_num(ranked[0][1])}°C).{note}")
    top, t_top = ranked[0]
    if len(temps) == 2:
        other, t_other = ranked[1]
        diff = _num(round(abs(t_top - t_other), 1))
        return (f"{top}{word}：{_num(t_top)}°C，比{other}（{_num(t_other)}°C）{'高' if hot else '低'} {diff}°C。{note}"
                if zh else f"{top} is {en_word}: {_num(t_top)}°C vs {_num(t_other)}°C in {other} "
                           f"({diff}°C {'warmer' if hot else 'colder'}).{note}")
    last, t_last = ranked[-1]
    return (f"{top}{word}（{_num(t_top)}°C），{last}{'最冷' if hot else '最热'}（{_num(t_last)}°C）。{note}" if zh
            else f"{top} is the {'hottest' if hot else 'coldest'} ({_num(t_top)}°C) and {last} the "
                 f"{'coldest' if hot else 'warmest'} ({_num(t_last)}°C).{note}")


def _time_line(data: dict[str, Any], city: str, lang: str) -> str:
    weekday = str(data.get("weekday") or "")
    offset = str(data.get("utc_offset") or "")
    offset = offset if offset.upper().startswith("UTC") or not offset else f"UTC{offset}"
    tz = data.get("timezone") or ""
    if lang == "zh":
        weekday = _WEEKDAYS_ZH.get(weekday.lower(), weekday)
        where = f"{city}现在" if city else "现在"
        extra = "，".join(x for x in (weekday, tz, offset) if x)
        return f"{where}是 {data.get('date', '')} {data.get('time', '')}（{extra}）。".replace(" （", "（")
    where = f"in {city}" if city else "now"
    extra = ", ".join(x for x in (tz, offset) if x)
    day = f"{weekday}, " if weekday else ""
    return f"It is {data.get('time', '')} on {day}{data.get('date', '')} {where} ({extra})."


def _fact_line(state: TaskState, lang: str) -> str:
    results = state.value or []
    top = results[0]
    lead = ""
    if state.task.params.get("name_wanted"):
        person = find_person(results, exclude=state.task.params["query"], role=role_of(state.task.params["clause"]))
        if person:
            lead = f"答：{person.render(lang)}。" if lang == "zh" else f"Answer: {person.render(lang)}. "
    snippet = str(top.get("snippet") or top.get("title") or "").strip()
    if lang == "zh":
        return f"{lead}根据搜索结果{_source(str(top.get('source', '')), lang)}：{snippet}"
    source = f"According to {top.get('source')}" if top.get("source") else "According to the search results"
    return f"{lead}{source}: {snippet}"


def _http_line(data: dict[str, Any], url: str, lang: str) -> str:
    body = str(data.get("body") or "")
    title = re.search(r"<title[^>]*>(.*?)</title>", body, re.I | re.S)
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body)).strip()[:300]
    cut = "…" if data.get("truncated") or len(text) >= 300 else ""
    if lang == "zh":
        head = f"已获取 {url}：HTTP {data.get('status_code')}，类型 {data.get('content_type', '')}。"
        return head + (f"标题：{title.group(1).strip()}。" if title else "") + f"内容摘要：{text}{cut}"
    head = f"Fetched {url}: HTTP {data.get('status_code')}, {data.get('content_type', '')}. "
    return head + (f"Title: {title.group(1).strip()}. " if title else "") + f"Content: {text}{cut}"


def _chain_line(state: TaskState, plan: Plan, lang: str) -> str:
    task, zh, p = state.task, lang == "zh", state.task.params
    subject = subject_name(plan, lang)
    origin: DateFact | None = plan.value("origin")
    if task.kind == "who":
        phrase, person = who_phrase(task, lang), state.value
        return (f"{spaced(phrase)}是{person.render(lang)}{_source(person.source, lang)}。" if zh
                else f"{phrase[:1].upper() + phrase[1:]} is {person.render(lang)}{_source(person.source, lang)}.")
    if task.kind == "origin":
        date: DateFact = state.value
        if zh:
            return f"{spaced(subject)}{verb_zh(p['verb'])}于 {date.render(lang)}{_source(date.source, lang)}。"
        on = "on" if date.day else "in"
        return f"{subject} was {verb_en(p['verb'])} {on} {date.render(lang)}{_source(date.source, lang)}."
    expression = state.observation.call.args.get("expression", "") if state.observation else ""
    total = _num(state.value)
    if origin is None:  # accumulate and elapsed are computed from the origin, so it is known here
        raise ValueError(f"{task.kind} answered before the chain's origin")
    if task.kind == "accumulate":
        target = _target(plan)
        period = {"day": "天", "week": "周", "month": "月", "year": "年"}[p["period"]]
        assumed = "（假设每年 365 天）" if p["assumed"] else ""
        if zh:
            days = f"按每年 {p['per_year']} 天计算，" if p["period"] == "day" and not p["assumed"] else ""
            return (f"如果从 {origin.year} 年开始每{period}{p['verb']} {p['amount']} {p['unit']}，{days}到 {target} 年"
                    f"一共{p['verb']}了 {total} {p['unit']}（{expression} = {total}）{assumed}。")
        per = f" ({p['per_year']} days a year{', assumed' if p['assumed'] else ''})" if p["period"] == "day" else ""
        return (f"At {p['amount']} {p['unit']} per {p['period']} from {origin.year} to {target}{per}, that is "
                f"{total} {p['unit']} in total ({expression} = {total}).")
    target = _target(plan)
    if not p["age"]:
        verb = verb_zh(plan.question.required("origin").params["verb"])
        return (f"到 {target} 年，{spaced(subject)}已经{verb}了 {total} 年（{expression} = {total}）。" if zh
                else f"By {target}, that is {total} years ({expression} = {total}).")
    return _age_line(plan, subject, origin, int(state.value), expression, target, lang)


def _target(plan: Plan) -> int | None:
    task = plan.question.task("elapsed")
    return (task.params.get("target") if task else None) or current_date(plan.value("now"))[0]


def _age_line(plan: Plan, subject: str, origin: DateFact, years: int, expression: str, target: Any,
              lang: str) -> str:
    zh = lang == "zh"
    _, month, day = current_date(plan.value("now"))
    if origin.month and origin.day and month and day and not plan.question.required("elapsed").params.get("target"):
        passed = (month, day) >= (origin.month, origin.day)
        age = years if passed else years - 1
        today = plan.value("now").get("date", "")
        if zh:
            status = "已经过了" if passed else "还没到"
            fix = "" if passed else "，生日未到再减 1"
            return (f"今天是 {today}，{spaced(subject)}今年的生日（{origin.month}月{origin.day}日）{status}，"
                    f"所以{spaced(subject)}现在 "
                    f"{age} 岁（{expression} = {years}{fix}）。")
        status = "has already passed" if passed else "has not come yet"
        birthday = origin.render(lang).rsplit(",", 1)[0]
        return (f"Today is {today} and {subject}'s birthday this year ({birthday}) {status}, so "
                f"{subject} is {age} years old ({expression} = {years}{'' if passed else ', minus 1'}).")
    origin_task = plan.question.required("origin")
    if not origin_task.params.get("person"):
        verb = verb_zh(origin_task.params["verb"])
        return (f"按{verb}年份计算，{spaced(subject)}在 {target} 年是 {years} 岁（{expression} = {years}）。" if zh
                else f"Counted from {origin.year}, {subject} is {years} years old in {target} "
                     f"({expression} = {years}).")
    if zh:
        return (f"按年份计算，{spaced(subject)}在 {target} 年满 {years} 岁（{expression} = {years}；"
                f"若当年生日还没到则为 {years - 1} 岁）。")
    return (f"Counting by year, {subject} turns {years} in {target} ({expression} = {years}; "
            f"{years - 1} before the birthday).")


def _line(state: TaskState, plan: Plan, lang: str) -> str:
    task, value = state.task, state.value
    if is_passthrough(value):
        return passthrough_line(value, lang)
    if task.kind == "weather":
        return _weather_line(value, task.params["city"], lang)
    if task.kind == "time":
        return _time_line(value, task.params.get("city", ""), lang)
    if task.kind == "calc":
        made = state.observation.call.args if state.observation else {}
        expression = made.get("expression", task.params["expression"])
        return (f"计算结果：{expression} = {_num(value)}。" if lang == "zh" else f"{expression} = {_num(value)}.")
    if task.kind == "fact":
        return _fact_line(state, lang)
    if task.kind == "http":
        return _http_line(value, task.params["url"], lang)
    if task.kind == "diff":
        made = state.observation.call.args if state.observation else {}
        return diff_line(task, str(made.get("expression", "")), value, lang)
    if task.kind == "vs":
        return vs_line(task, value, lang)
    return _chain_line(state, plan, lang)


_EDITED = {True: "（这一项按审批人修改后的调用回答）", False: " (answered from the call as a person edited it)"}


def _quoted(clauses: list[str], zh: bool) -> str:
    return "、".join(f"「{u}」" for u in clauses) if zh else ", ".join(f'"{u}"' for u in clauses)


def final_answer(plan: Plan, lang: str) -> str:
    """The answer from what the sub-tasks found, then what is missing and why."""
    question = plan.question
    if not question.tasks and not question.unresolved:  # an unresolved reference is said as such, not as "cannot"
        return cannot_answer(lang)
    zh = lang == "zh"
    done = [s for s in plan.states.values() if s.status == "done" and s.task.shown]
    lines = [_line(s, plan, lang) + (_EDITED[zh] if s.task.params.get("person_call") else "") for s in done]
    weather = [i for i, s in enumerate(done) if s.task.kind == "weather"]
    if question.compare and weather:
        lines.insert(weather[-1] + 1, _comparison(plan, lang))
    if not done and not question.unhandled:
        lines.append("没能用离线工具找到答案。" if zh else "I could not find the answer with the offline tools.")
    if any(s.task.kind == "weather" and not s.task.params["city"] for s in plan.states.values()):
        lines.append("请告诉我要查询哪个城市的天气：问题里没有指定城市，所以没有查询。" if zh
                     else "Which city do you mean? No city was named, so I did not look up the weather.")
    missing = [f"{label(s, plan, lang)}（{missing_reason(s, lang)}）" if zh
               else f"{label(s, plan, lang)} ({missing_reason(s, lang)})"
               for s in plan.states.values()
               if s.status != "done" and not (s.task.kind == "weather" and not s.task.params["city"])
               and (s.task.shown or s.failures)]
    if missing:
        lines.append(("还缺少：" + "；".join(missing) + "。") if zh else ("Missing: " + "; ".join(missing) + "."))
    if plan.stopped:
        lines.append("（上一次调用与之前的完全重复，没有新信息，所以不再调用工具，直接基于已有信息作答。）" if zh
                     else "(The last call repeated an earlier one with nothing new, so I stopped calling tools and "
                          "answered with what I have.)")
    if question.unresolved:
        quoted = _quoted(question.unresolved, zh)
        lines.append(f"{quoted}所指的地方没有点名（前面没有提到，或要由别的结果来定），所以没有回答。" if zh
                     else f"{quoted} refers to a place it does not name (none named before, or one another part's "
                          "result would pick), so it is not answered.")
    if others := [clause for clause in question.unhandled if clause not in question.unresolved]:
        quoted = _quoted(others, zh)
        lines.append(f"另外，{quoted}这部分无法由离线脚本模型回答（需要配置真实模型，见 REACTGRAPH_MODEL）。" if zh
                     else f"Also, {quoted} cannot be answered by the scripted offline model (configure a real model "
                          f"via REACTGRAPH_MODEL).")
    text = "\n".join(line for line in lines if line)
    return re.sub(r"(?<=[\u4e00-\u9fff])(?=[A-Za-z])|(?<=[A-Za-z])(?=[\u4e00-\u9fff])", " ", text) if zh else text

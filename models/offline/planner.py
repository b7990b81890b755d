"""Deciding the next step: which tool calls each sub-task still needs, given this turn's observations.

Every sub-task has an ordered list of attempts (the obvious call first, then rephrasings and fallbacks). Walking
that list against the observations says whether the task is done, failed for good, or which call comes next —
so the plan is a pure function of the messages, a call is never repeated, and a failure changes course.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from . import derive, passthrough, rag
from .arith import as_number, compact, format_number
from .chain import origin_query
from .conversation import Call, Observation, Turn
from .extract import (
    DateFact,
    Person,
    current_date,
    find_date,
    find_person,
    hits,
    mentions_role,
    role_of,
    snippet_temperature,
)
from .faults import failure_reason
from .frames import core_entity, english_query, role_query
from .lexicon import english_entity, lookup_city
from .question import Question, Task, decompose

BUILTIN_TOOLS = frozenset({"calculator", "get_time", "get_weather", "search", "rag_search", "http_get"})


@dataclass
class TaskState:
    """Where one sub-task stands after reading the observations."""

    task: Task
    status: str = "pending"  # done | failed | pending (a call is due or possible) | waiting (on another task)
    value: Any = None
    observation: Observation | None = None
    next_call: Call | None = None
    failures: list[tuple[Call, str]] = field(default_factory=list)

    def reason(self, lang: str) -> str:
        """Why the task is not done: the first failure, noting that the fallbacks did not help either."""
        reasons = list(dict.fromkeys(why for _, why in self.failures))
        if not reasons:
            return ""
        if len(self.failures) == 1:
            return reasons[0]
        if lang == "zh":
            return f"{reasons[0]}，备选方案也没有结果"
        return f"{reasons[0]}; the fallbacks found nothing either"


@dataclass
class Plan:
    """The decomposed question, the state of each sub-task and the calls to make now (none: answer)."""

    question: Question
    states: dict[str, TaskState]
    calls: list[Call]
    stopped: bool = False  # the latest round repeated an earlier call: answer with what is known

    def value(self, key: str) -> Any:
        state = self.states.get(key)
        return state.value if state and state.status == "done" else None


def _unique(calls: list[Call]) -> list[Call]:
    return list(dict.fromkeys(calls))


def _search(query: str) -> Call:
    return Call("search", {"query": query})


def _calc(expression: str) -> list[Call]:
    return _unique([Call("calculator", {"expression": expression}),
                    Call("calculator", {"expression": compact(expression)})])


def attempts(task: Task, plan: Plan, lang: str) -> list[Call]:
    """The calls that could complete a task, best first; later ones are fallbacks after a failure."""
    p = task.params
    if task.kind == "http":
        return [Call("http_get", {"url": p["url"]})]
    if task.kind == "calc":
        return _calc(p["expression"])
    if task.kind == "time":
        if not p.get("tz"):
            return [Call("get_time", {})]
        city = lookup_city(p["city"])
        return _unique([Call("get_time", {"timezone": p["tz"]})]
                       + ([Call("get_time", {"timezone": city.en})] if city else []))
    if task.kind == "weather":
        if not p["city"]:
            return []
        word = "天气" if lang == "zh" else "weather"
        return [Call("get_weather", {"city": p["city"]}), _search(f"{p['city']} {word}")]
    if task.kind in ("fact", "who"):
        query = p["query"]
        core = core_entity(query) or query
        role = role_query(p.get("clause", ""), english_entity(core) or core) if p.get("name_wanted") else ""
        english = english_query(query)
        if sorted(english.lower().split()) == sorted(role.lower().split()):
            english = ""  # the same words as the role query, in another order: not another way to ask
        return _unique([_search(q) for q in (query, english, role, core) if q]
                       + [Call("search", {"query": core, "top_k": 5})])
    if task.kind == "now":
        return [Call("get_time", {}), Call("get_time", {"timezone": "UTC"})]
    if task.kind == "origin":
        person: Person | None = plan.value("who")
        names = [person.name, person.alt] if person else [p["subject"], english_entity(p["subject"]) or ""]
        queries = [origin_query(names[0], p["verb"], lang), names[0]]
        if names[1]:
            queries += [origin_query(names[1], p["verb"], "en" if lang == "zh" else "zh")]
        return _unique([_search(q) for q in queries if q.strip()] + [Call("search", {"query": names[0], "top_k": 5})])
    if task.kind == "elapsed":
        origin: DateFact = plan.value("origin")
        target = p["target"] or current_date(plan.value("now"))[0]
        return _calc(f"{target} - {origin.year}")
    if task.kind == "diff":
        expression = derive.diff_expression(task, [plan.value(k) for k in task.needs])
        return _calc(expression) if expression else []
    if task.kind == "accumulate":
        years = format_number(plan.value("elapsed"))
        per_year = task.params["per_year"]
        expression = f"{years} * {per_year} * {p['amount']}" if per_year != 1 else f"{years} * {p['amount']}"
        return _calc(expression)
    return []


def _no_weather(data: dict[str, Any], city: str, lang: str) -> str:
    cities = [str(c) for c in data.get("known_cities") or []][:10]
    known = ("、" if lang == "zh" else ", ").join(cities)
    if lang == "zh":
        return f"没有{city}的天气数据" + (f"，有数据的城市包括：{known}" if known else "")
    return f"no weather data for {city}" + (f"; cities with data: {known}" if known else "")


def accept(task: Task, observation: Observation, lang: str, names: tuple[str, ...] = ()) -> tuple[Any, str]:
    """(value, "") when an observation completes the task, else (None, why it did not).

    `names` are the ways the subject of an origin task is written (a date must be about them).
    """
    if observation.call.name == rag.TOOL:
        passages, why = rag.accept(task, observation, lang)
        if why or task.params.get("documents"):
            return passages, why
        # A fallback to the documents: the passages must say who holds the role asked about, or when.
        return _read_hits(task, [h for h in passages if mentions_role(h, _asked_role(task))], lang, names,
                          "文档中没有找到相关内容" if lang == "zh" else "nothing relevant in the documents")
    if not observation.ok:
        return None, failure_reason(observation.content, lang, observation.status, observation.attempts)
    data, nothing = observation.data, ("没有找到相关结果" if lang == "zh" else "nothing relevant was found")
    name = observation.call.name
    if task.kind in passthrough.KINDS and passthrough.foreign(observation):
        return passthrough.value(observation), ""  # a user's replacement tool: its output is the answer
    if name == "calculator":
        number = as_number(data.get("result")) if isinstance(data, dict) else None
        return (number, "") if number is not None else (None, nothing)
    if name == "get_time":
        ok = isinstance(data, dict) and (data.get("time") or data.get("iso")) and current_date(data)[0]
        return (data, "") if ok else (None, nothing)
    if name == "get_weather" and isinstance(data, dict) and data.get("found") is False:
        return None, _no_weather(data, task.params["city"], lang)  # no data for that place: a missing part
    if name in ("get_weather", "http_get"):
        return (data, "") if isinstance(data, dict) else (None, nothing)
    results = hits(data)
    if not results:
        message = data.get("message") if isinstance(data, dict) else ""
        return None, str(message or nothing).rstrip("。. ")
    return _read_hits(task, results, lang, names, nothing)


def _asked_role(task: Task) -> str:
    """The role a who-question asks about ("" for other questions, which need no role word)."""
    if task.kind == "who":
        return role_of(task.params["query"])
    return role_of(task.params.get("clause", "")) if task.params.get("name_wanted") else ""


def _read_hits(task: Task, results: list[dict[str, Any]], lang: str, names: tuple[str, ...],
               nothing: str) -> tuple[Any, str]:
    """The value a task needs from search hits: a city's weather, a person, a date, or the passages."""
    if not results:
        return None, nothing
    if task.kind == "weather":
        for hit in results:
            text = f"{hit.get('title', '')} {hit.get('snippet', '')}"
            if task.params["city"].lower() in text.lower() and ("天气" in text or "weather" in text.lower()
                                                                 or snippet_temperature(text) is not None):
                return {"found": True, "via_search": True, "city": task.params["city"], "snippet": hit.get("snippet"),
                        "source": hit.get("source", ""), "temperature_c": snippet_temperature(text)}, ""
        return None, nothing
    if task.kind == "who":
        exclude = f"{task.params['query']} {english_query(task.params['query'])}"
        person = find_person(results, exclude=exclude, role=role_of(task.params["query"]))
        return (person, "") if person else (None, nothing)
    if task.kind == "origin":
        date = find_date(results, birth=task.params["birth"], person=task.params.get("person", False),
                         names=names, verb=task.params["verb"])
        return (date, "") if date else (None, nothing)
    if task.params.get("name_wanted") and not find_person(results, exclude=task.params["query"],
                                                          role=role_of(task.params.get("clause", ""))):
        return None, "搜索结果没有提到是谁" if lang == "zh" else "the results do not say who"
    return results, ""


def _no_data_for_place(observation: Observation) -> bool:
    """The weather tool answered that it has no data for the place: searching the web for it will not help."""
    data = observation.data
    return observation.call.name == "get_weather" and isinstance(data, dict) and data.get("found") is False


def _names(task: Task, plan: Plan) -> tuple[str, ...]:
    if task.kind != "origin":
        return ()
    person: Person | None = plan.value("who")
    if person:
        return person.name, person.alt
    subject = task.params["subject"]
    return subject, english_entity(subject) or ""


def _resolve(task: Task, plan: Plan, lang: str, turn: Turn, tools: Collection[str] | None) -> TaskState:
    state = TaskState(task)
    deps = [plan.states[k] for k in task.needs if k in plan.states]
    if any(d.status == "failed" for d in deps):
        state.status = "failed"
        return state
    if any(d.status != "done" for d in deps):
        state.status = "waiting"
        return state
    if task.kind in derive.LOCAL_KINDS:  # decided from the other parts' values, no tool needed
        state.value = derive.vs_value(*(plan.value(k) for k in task.needs))
        state.status = "done" if state.value is not None else "failed"
        return state
    candidates = rag.route(task, attempts(task, plan, lang), turn, tools)
    if not candidates:
        state.status = "failed"
        state.failures.append((Call(""), "没有指定城市" if lang == "zh" else "no city was named"))
        return state
    errored = False
    for call in candidates:
        observation = turn.find(call)
        if observation is None and "top_k" in call.args and not errored:
            continue  # a wider search only helps after an error; "found nothing" would just repeat itself
        if observation is None:
            if tools is not None and call.name not in tools:
                unavailable = "工具未提供" if lang == "zh" else "the tool is not available"
                state.failures.append((call, f"{call.name} {unavailable}"))
                continue
            state.next_call = call
            return state
        value, why = accept(task, observation, lang, _names(task, plan))
        if why == "":
            state.status, state.value, state.observation = "done", value, observation
            return state
        errored = not observation.ok
        state.failures.append((call, why))
        if observation.ok and _no_data_for_place(observation):
            break
    state.status = "failed"
    return state


def make_plan(turn: Turn, tools: Collection[str] | None) -> Plan:
    """The next step for this turn. `tools=None` means no tools are bound: nothing more can be called."""
    question = rag.documents_question(decompose(turn.question, turn.history))
    plan = Plan(question=question, states={}, calls=[])
    for task in question.tasks:
        plan.states[task.key] = _resolve(task, plan, question.lang, turn, tools)
    plan.stopped = bool(turn.observations) and turn.repeated()
    if tools is not None and not plan.stopped:
        plan.calls = _unique([s.next_call for s in plan.states.values() if s.next_call is not None])
    return plan

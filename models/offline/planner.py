"""Deciding the next step: which tool calls each sub-task still needs, given this turn's observations.

Every sub-task has an ordered list of attempts (the obvious call first, then rephrasings and fallbacks), and walking
that list against the observations says whether the task is done, failed for good, or which call comes next: the
plan is a pure function of the messages, a call is never repeated, and a failure changes course. A failure is given
an honest reason in the user's words that follows the result's status (a timeout, a transient error, a busy tool,
an open circuit, invalid arguments…), never one cause for every failure. The user's documents take their place in
the list: a question with a document cue ("根据知识库，…", "according to the documents, …") becomes one rag_search
lookup with the knowledge-base search as its fallback, and a fact, role or date that search cannot find is looked
for with rag_search next, when it is bound; a passage found that way must mention the searched key words (a nearest
neighbour always exists) and must hold the name or date asked for.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from .compute import LOCAL_KINDS, as_number, compact, diff_expression, format_number, vs_value
from .conversation import PASSTHROUGH_KINDS, Call, Observation, Turn, is_foreign_output, passthrough_value
from .decisions import person_calls, with_person_calls
from .failures import REJECTED_BEFORE, broken_tools, failure_kind, failure_reason, worth_another_try
from .places import same_place
from .question import (
    Question,
    Task,
    clean_query,
    core_entity,
    decompose,
    english_query,
    origin_query,
    resolve_pronouns,
    role_query,
    split_clauses,
)
from .words import (
    PRONOUNS,
    DateFact,
    Person,
    current_date,
    english_entity,
    find_date,
    find_person,
    hits,
    lookup_city,
    mentions_role,
    role_of,
    snippet_temperature,
    word_list,
)

RAG_TOOL = "rag_search"
# The kinds of task answered from search results: the documents are their fallback.
SEARCHED_KINDS = frozenset({"fact", "who", "origin"})
DOCUMENT_CUE = re.compile(
    r"(?:根据|依据|按照|基于|参考|查一?下|查查|从|在)(?:我的|本地的?|已导入的)?(?:知识库|文档|资料库|笔记)(?:里|中|里面)?"
    r"(?:的内容|的资料)?(?:来)?(?:回答|说)?|(?:知识库|我的文档|我的笔记|我的资料)(?:里|中|里面)(?:的内容)?|"
    r"\b(?:according to|based on|from|in|using|per|search)\s+(?:the|my|our)\s+(?:(?:ingested|local|own)\s+)?"
    r"(?:documents?|docs|notes|knowledge base|files)\b",
    re.IGNORECASE)
# Words that say nothing about what a passage is about: a passage holding them is not about the question.
_FUNCTION_WORDS = frozenset(word_list("stop_words_en")) | {"and", "or", "also", "then", "with", "from", "that",
                                                           "this", "has", "have", "how", "many", "much", "any"}
_EDGE = re.compile(r"^[\s,，:：;；、.。]+|[\s,，:：;；、]+$")
_LATIN = re.compile(r"[a-z][a-z0-9_.+#-]{2,}")
_CJK_RUN = re.compile(r"[\u3400-\u9fff]{2,}")
# A passage found by the fallback must contain this share of the query's key words.
_GROUNDING = 0.5
# Similarity above which a passage is trusted whatever its words; in the question's language a lower one does.
_STRONG_SCORE = 0.6
_SAME_LANGUAGE_SCORE = 0.15


def _cjk_share(text: str) -> float:
    letters = [ch for ch in text if ch.isalpha()]
    return sum("\u3400" <= ch <= "\u9fff" for ch in letters) / len(letters) if letters else 0.0


def document_query(text: str) -> str | None:
    """The question without its document cue, or None when it does not ask about the user's documents."""
    normalized = unicodedata.normalize("NFKC", text)
    if not DOCUMENT_CUE.search(normalized):
        return None
    # Line breaks stay: they part the goals of a plan step ("…\nAccording to the documents, …"), as sentences do.
    lines = [re.sub(r"\s+", " ", _EDGE.sub("", line)).strip() for line in DOCUMENT_CUE.sub(" ", normalized).split("\n")]
    return "\n".join(line for line in lines if line) or None


# "…预算上限是多少，谁负责安全评审？": in a question about the documents a comma before a question word starts a part.
_DOCUMENT_PART = re.compile(r"[，,]\s*(?=谁|什么时候|何时|哪|多少|是否|怎么|如何)")
DOCUMENT_PREFIX = {"zh": "根据知识库，", "en": "According to the documents, "}


def documents_question(question: Question) -> Question:
    """A question with a document cue becomes one document lookup per part it asks ("what is X's budget and who
    owns its review?" two, the second about X); any other question is returned as it is."""
    query = document_query(question.text)
    if query is None:
        return question
    parts = [part for clause in split_clauses(query) for part in _DOCUMENT_PART.split(clause) if part.strip()]
    if len(parts) <= 1:
        keywords = clean_query(query) or query
        task = Task(f"fact:{keywords}", "fact", {"query": keywords, "clause": query, "name_wanted": False,
                                                 "documents": query})
        return Question(text=question.text, lang=question.lang, tasks=[task])
    tasks: dict[str, Task] = {}
    entity = ""
    for part in parts:
        keywords = clean_query(part) or part
        # "when does it start?" asks about the first part's subject (clean_query has dropped the "it" already)
        refers = bool(entity) and (any(word.strip("?.,!").lower() in PRONOUNS for word in part.split())
                                   or bool(re.search(r"[它他她其]", part)))
        resolved = resolve_pronouns(keywords, entity) if refers else keywords
        if refers and entity not in resolved:
            resolved = f"{entity} {resolved}"
        entity = entity or core_entity(keywords)
        tasks.setdefault(f"fact:{resolved}", Task(f"fact:{resolved}", "fact", {
            "query": resolved, "clause": part, "name_wanted": False, "part": True,
            "documents": part if resolved == keywords else resolved, "subject": entity if refers else ""}))
    return Question(text=question.text, lang=question.lang, tasks=list(tasks.values()))


def place_rag_search(task: Task, candidates: list[Call], turn: Turn, tools: Collection[str] | None) -> list[Call]:
    """The attempts of a task with rag_search placed: first for a document question, else right after the
    first search (so a fact, a name or a date missing from the knowledge base is looked up in the documents
    before rephrasing)."""
    if task.kind not in SEARCHED_KINDS or not candidates:
        return candidates
    documents = task.params.get("documents")
    call = Call(RAG_TOOL, {"query": documents or candidates[0].args.get("query") or task.params.get("query", "")})
    if documents:
        return [call, *candidates]
    available = turn.find(call) is not None if tools is None else RAG_TOOL in tools
    if not available or candidates[0].name != "search":
        return candidates
    return [candidates[0], call, *candidates[1:]]


def _key_words(query: str) -> set[str]:
    text = unicodedata.normalize("NFKC", query).casefold()
    words = set(_LATIN.findall(text)) - _FUNCTION_WORDS
    for run in _CJK_RUN.findall(text):
        words.update(run[i:i + 2] for i in range(len(run) - 1))
    return words


def _grounded(hit: dict[str, Any], words: set[str], subject: str = "") -> bool:
    """The passage holds enough of the query's key words, and (when the part refers back to one) its subject."""
    text = unicodedata.normalize("NFKC", f"{hit.get('title', '')} {hit.get('snippet', '')}").casefold()
    if subject:
        # "…, who is its CEO?": another company's CEO is not an answer, nor a passage that only names the subject
        if unicodedata.normalize("NFKC", subject).casefold() not in text:
            return False
        asked = words - _key_words(subject)
        if asked and not any(word in text for word in asked):
            return False
    return not words or sum(word in text for word in words) >= _GROUNDING * len(words)


def accept_passages(task: Task, observation: Observation, lang: str) -> tuple[Any, str]:
    """(passages, "") when a rag_search observation answers the task, else (None, why it did not).

    Passages found as a fallback are those that mention the searched words; the caller still reads the name or
    the date it needs out of them."""
    if not observation.ok:
        return None, failure_reason(observation.content, lang, observation.status, observation.attempts)
    data = observation.data
    results = hits(data)
    nothing = "文档中没有找到相关内容" if lang == "zh" else "nothing relevant in the documents"
    if not results:
        message = data.get("message") if isinstance(data, dict) else ""
        return None, str(message or nothing).rstrip("。. ")
    query = str(task.params.get("query") or observation.call.args.get("query", ""))
    words = _key_words(query)
    if not task.params.get("documents"):
        results = [hit for hit in results if _grounded(hit, words)]
        return (results, "") if results else (None, nothing)
    # A document question takes the nearest passages, unless none shares the question's words or language and
    # none scores strongly: then the nearest neighbour (always there) is a guess, said so instead of quoted.
    # One part of a question of several parts takes only passages about that part: the nearest passage is about
    # some part, not necessarily this one.
    subject = str(task.params.get("subject") or "")
    trusted = [hit for hit in results if _grounded(hit, words, subject) or (not subject and _strong(hit))
               or (not task.params.get("part") and _same_script(hit, query) and _score(hit) >= _SAME_LANGUAGE_SCORE)]
    if not trusted:
        return None, ("文档中最接近的段落与问题的语言或用词不符，无法确定答案" if lang == "zh"
                      else "the closest passages in the documents do not match the question's words or language; "
                           "the answer is uncertain")
    return trusted, ""


def _score(hit: dict[str, Any]) -> float:
    score = hit.get("score")
    return float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else 1.0


def _strong(hit: dict[str, Any]) -> bool:
    return _score(hit) >= _STRONG_SCORE


def _same_script(hit: dict[str, Any], query: str) -> bool:
    """Both mostly Chinese or both mostly Latin script (a passage in another language than the question)."""
    return _cjk_share(str(hit.get("snippet", ""))) >= 0.3 if _cjk_share(query) >= 0.3 else \
        _cjk_share(str(hit.get("snippet", ""))) < 0.3


def describe_rag_call(call: Call, lang: str) -> str:
    """The Thought's words for a rag_search call."""
    query = call.args.get("query")
    return f"在知识库文档中检索“{query}”" if lang == "zh" else f'search the ingested documents for "{query}"'


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
        expression = diff_expression(task, [plan.value(k) for k in task.needs])
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
    if observation.call.name == RAG_TOOL:
        passages, why = accept_passages(task, observation, lang)
        if why or task.params.get("documents"):
            return passages, why
        # A fallback to the documents: the passages must say who holds the role asked about, or when.
        return _read_hits(task, [h for h in passages if mentions_role(h, _asked_role(task))], lang, names,
                          "文档中没有找到相关内容" if lang == "zh" else "nothing relevant in the documents")
    if observation.status == "responded":  # a person answered in the tool's place: their text is the answer
        if task.kind in PASSTHROUGH_KINDS or task.kind == "call":
            return {**passthrough_value(observation), "person": True}, ""
        return None, ("审批人代替工具作了答复，无法从中读出所需信息" if lang == "zh"
                      else "a person answered in the tool's place; the answer does not give what this part needs")
    if not observation.ok:
        return None, _failed(task, observation, lang)
    if task.kind == "call":  # a person's call of a tool the model does not know: its output is the answer
        return passthrough_value(observation), ""
    data, nothing = observation.data, ("没有找到相关结果" if lang == "zh" else "nothing relevant was found")
    name = observation.call.name
    if task.kind in PASSTHROUGH_KINDS and is_foreign_output(observation):
        return passthrough_value(observation), ""  # a user's replacement tool: its output is the answer
    if task.kind == "weather" and name == "get_weather" and isinstance(data, dict) and data.get("found") is not False \
            and not same_place(task.params["city"], data.get("city")):
        return None, _other_place(str(data.get("city")), task.params["city"], lang)  # never another place's data
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
    if task.params.get("documents"):  # the web for a document question: only hits about what it asks count
        words, subject = _key_words(task.params["query"]), str(task.params.get("subject") or "")
        results = [hit for hit in results if _grounded(hit, words, subject)]
    return _read_hits(task, results, lang, names, nothing)


def _failed(task: Task, observation: Observation, lang: str) -> str:
    """Why a failed call did not complete the task; the clock's refusal of a place the gazetteer lacks says so."""
    kind = failure_kind(observation.content, observation.status, observation.attempts)
    city = task.params.get("city") or ""
    if task.kind == "time" and kind == "invalid_args" and city and lookup_city(city) is None:
        return f"不知道{city}的时区" if lang == "zh" else f"no time zone is known for {city}"
    return failure_reason(observation.content, lang, observation.status, observation.attempts)


def _other_place(answered: str, asked: str, lang: str) -> str:
    return (f"天气工具给出的是{answered}的数据，不是{asked}的" if lang == "zh"
            else f"the weather tool answered for {answered}, not for {asked}")


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


def _resolve(task: Task, plan: Plan, lang: str, turn: Turn, tools: Collection[str] | None,
             taken: Mapping[str, Call]) -> TaskState:
    state = TaskState(task)
    deps = [plan.states[k] for k in task.needs if k in plan.states]
    if any(d.status == "failed" for d in deps):
        state.status = "failed"
        return state
    if any(d.status != "done" for d in deps):
        state.status = "waiting"
        return state
    if task.kind in LOCAL_KINDS:  # decided from the other parts' values, no tool needed
        state.value = vs_value(*(plan.value(k) for k in task.needs))
        state.status = "done" if state.value is not None else "failed"
        return state
    # A part a person's edited call stands for is answered by that call alone (decisions.py).
    candidates = [taken[task.key]] if task.key in taken else place_rag_search(task, attempts(task, plan, lang),
                                                                               turn, tools)
    if not candidates:
        state.status = "failed"
        state.failures.append((Call(""), "没有指定城市" if lang == "zh" else "no city was named"))
        return state
    return _walk(state, candidates, plan, lang, turn, tools)


def _walk(state: TaskState, candidates: list[Call], plan: Plan, lang: str, turn: Turn,
          tools: Collection[str] | None) -> TaskState:
    """The part's attempts against the observations: done, the next call to make, or failed for good."""
    errored = False
    for call in candidates:
        observation = turn.find(call)
        if observation is None and call in turn.declined:
            state.failures.append((call, REJECTED_BEFORE[0 if lang == "zh" else 1]))
            break  # a person said no to it in an earlier trial: not asked again, nor worked around
        if observation is None and "top_k" in call.args and not errored:
            continue  # a wider search only helps after an error; "found nothing" would just repeat itself
        if observation is None:
            if tools is not None and call.name not in tools:
                unavailable = "工具未提供" if lang == "zh" else "the tool is not available"
                state.failures.append((call, f"{call.name} {unavailable}"))
                continue
            if call.name in broken_tools(turn):
                continue  # it failed for good on other arguments already: another query will fail the same way
            state.next_call = call
            return state
        value, why = accept(state.task, observation, lang, _names(state.task, plan))
        if why == "":
            state.status, state.value, state.observation = "done", value, observation
            return state
        if worth_another_try(observation, turn) and (tools is None or call.name in tools):
            state.next_call = call
            return state
        errored = not observation.ok
        state.failures.append((call, why))
        if _decided_by_person(observation) or (observation.ok and _no_data_for_place(observation)):
            break
    state.status = "failed"
    return state


def _decided_by_person(observation: Observation) -> bool:
    """A person rejected the call or answered it: the part takes that decision, no other call is tried."""
    return observation.status == "responded" or (
        not observation.ok and failure_kind(observation.content, observation.status) == "rejected")


def make_plan(turn: Turn, tools: Collection[str] | None) -> Plan:
    """The next step for this turn. `tools=None` means no tools are bound: nothing more can be called."""
    question = documents_question(decompose(turn.question, turn.history))
    plan = _planned(question, turn, tools, {})
    if taken := person_calls(plan.states, turn):  # a person edited calls: their calls stand for those parts
        plan = _planned(with_person_calls(question, taken), turn, tools, taken)
    return plan


def _planned(question: Question, turn: Turn, tools: Collection[str] | None, taken: Mapping[str, Call]) -> Plan:
    plan = Plan(question=question, states={}, calls=[])
    for task in question.tasks:
        plan.states[task.key] = _resolve(task, plan, question.lang, turn, tools, taken)
    plan.stopped = bool(turn.observations) and turn.repeated()
    if tools is not None and not plan.stopped:
        plan.calls = _unique([s.next_call for s in plan.states.values() if s.next_call is not None])
    return plan

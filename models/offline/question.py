"""Decomposing a question into sub-tasks for the built-in tools (weather, time, arithmetic, search, chains)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .chain import Chain, find_chain
from .derive import DIFF, FOLLOW_ON, MORE, RATIO, derived
from .extract import is_founding, looks_like_person
from .frames import (
    COLD,
    COMPARE,
    QUESTION,
    SMALL_TALK,
    TIME,
    WEATHER,
    WHO_DID,
    calc_expression,
    clean_query,
    core_entity,
    is_creative,
    time_places,
    weather_cities,
)
from .lexicon import PRONOUNS, URL_RE, english_entity, find_cities, has_cjk, language_of, latin_terms, normalize
from .vocabulary import word_list


@dataclass
class Task:
    """One sub-task: a kind (weather, time, calc, fact, who, origin, now, elapsed, accumulate, http) and its slots."""

    key: str
    kind: str
    params: dict[str, Any] = field(default_factory=dict)
    needs: tuple[str, ...] = ()
    shown: bool = True  # False for helper steps the answer does not report on their own (the current year)


@dataclass
class Question:
    """The current question, decomposed."""

    text: str
    lang: str
    tasks: list[Task] = field(default_factory=list)
    compare: str | None = None  # "hot" or "cold" when the user asks which city is hotter / colder
    unhandled: list[str] = field(default_factory=list)  # sentences no built-in tool can answer
    chain: Chain | None = None

    def task(self, key: str) -> Task | None:
        return next((t for t in self.tasks if t.key == key), None)

    def required(self, key: str) -> Task:
        """The task the caller knows the question has (e.g. a chain's origin once its age is asked for)."""
        task = self.task(key)
        if task is None:
            raise KeyError(f"the question has no {key!r} task")
        return task


_EN_STARTS = (r"what|what's|whats|how|is|are|was|does|do|who|when|where|which|tell|calculate|compute|evaluate|"
              r"give|show|fetch|get|look|search|find|convert|check|then")
_JOINER = re.compile(r"[?？!！。；;\n]+|(?<![\d\x00])\.(?:\s+|$)"
                     rf"|[，,]?\s+(?:and\s+then|and\s+also|and|also|as\s+well\s+as|plus)\s+(?=(?:{_EN_STARTS})\b)"
                     r"|[，,]\s*(?:and\s+then|then|also)\s+"
                     r"|[，,]\s*(?:然后|并且|另外|同时|以及|还有|再)"
                     r"|[，,]\s*(?=计算|算一下|告诉我|查一下|查询|请问|什么是|谁是|(?:\S{1,6}?)(?:现在几点|的天气|天气))"
                     r"|(?:然后|并且|另外|同时)(?=\S)", re.I)


# "…, then add the temperature in Beijing": a word that combines results; a clause holding one is understood only
# when a calculation or a derived part (difference, ratio, scaling, comparison) came out of it.
_OPERATION = re.compile("|".join([*map(re.escape, word_list("result_operations")["zh"]),
                                  rf"\b(?:{'|'.join(map(re.escape, word_list('result_operations')['en']))})\b"]), re.I)


def split_clauses(text: str) -> list[str]:
    """Sentences of a question; URLs are kept whole although they contain "?" and "."."""
    urls = URL_RE.findall(text)
    masked = text
    for i, url in enumerate(urls):
        masked = masked.replace(url, f"\x00{i}\x00", 1)
    # "3 加 5 等于多少，然后上海天气如何": a joining word (with or without a comma before it) starts another part;
    # English joiners only when a new question or request follows ("weather in Beijing and Shanghai" stays one).
    parts = _JOINER.split(masked)
    clauses = []
    for part in parts:
        part = re.sub(r"\x00(\d+)\x00", lambda m: urls[int(m.group(1))], part).strip(" ,，、")
        if part:
            clauses.append(part)
    return clauses


def _chain_tasks(chain: Chain) -> list[Task]:
    tasks: list[Task] = []
    if chain.who_query:
        tasks.append(Task("who", "who", {"query": chain.who_query, "clause": chain.who_clause}))
    if not chain.needs_origin:
        return tasks
    dep = ("who",) if chain.who_query and not chain.subject else ()
    counts = chain.age or chain.elapsed or chain.rate is not None
    needs_now = counts and chain.target_year is None
    person = bool(dep) or (looks_like_person(english_entity(chain.subject) or chain.subject)
                           and not is_founding(chain.verb))
    verb = chain.verb
    if not person and verb.lower() in ("出生", "born"):
        verb = "诞生" if has_cjk(verb) else "released"  # "Python 今年多少岁": a thing is released, not born
    origin = Task("origin", "origin", {"subject": chain.subject, "verb": verb, "birth": chain.birth,
                                       "person": person}, needs=dep)
    now = Task("now", "now", {}, needs=dep, shown=False)
    # With no earlier step the current year is fetched first; after a who-step, alongside the birth search.
    tasks.extend(([now, origin] if not dep else [origin, now]) if needs_now else [origin])
    if counts:
        tasks.append(Task("elapsed", "elapsed", {"target": chain.target_year, "age": chain.age},
                          needs=("origin", "now") if needs_now else ("origin",),
                          shown=chain.age or chain.elapsed))
    if chain.rate:
        tasks.append(Task("accumulate", "accumulate", dict(chain.rate), needs=("elapsed",)))
    return tasks


def _resolve_pronouns(query: str, entity: str) -> str:
    words = [w for w in query.split() if w.lower() not in PRONOUNS]
    stripped = [re.sub(r"^(?:它们|他们|它|他|她|其)", "", w) for w in words]
    if entity and (len(stripped) != len(query.split()) or stripped != words):
        stripped.insert(0, entity)
    return " ".join(w for w in dict.fromkeys(stripped) if w)


def _context_entity(history: Sequence[str]) -> str:
    """The entity the previous question was about, for a follow-up like "它是谁开发的？"."""
    if not history:
        return ""
    previous = decompose(history[-1])
    for task in previous.tasks:
        if task.kind == "fact":
            return core_entity(task.params["query"])
        if task.kind == "origin" and task.params.get("subject"):
            return task.params["subject"]
    return ""


def decompose(text: str, history: Sequence[str] = ()) -> Question:
    """Sub-tasks of a question, in the order they should be reported; earlier questions give context only."""
    norm = normalize(text)
    question = Question(text=text, lang=language_of(text))
    if not norm:
        return question
    if is_creative(norm) or SMALL_TALK.match(norm):
        question.unhandled.append(norm)
        return question
    clauses = split_clauses(norm)
    tasks: dict[str, Task] = {}

    def add(task: Task) -> None:
        tasks.setdefault(task.key, task)

    for url in URL_RE.findall(norm):
        add(Task(f"http:{url}", "http", {"url": url.rstrip(".,)")}))
    chain = find_chain(clauses)
    question.chain = chain
    consumed = set(chain.clauses) if chain else set()
    for task in _chain_tasks(chain) if chain else []:
        add(task)

    entity = chain.subject if chain else ""
    framed: list[int] = []  # clauses the weather, time and arithmetic frames (or a follow-on scaling) read
    calculated: set[int] = set()
    for index, clause in enumerate(clauses):
        if index in consumed or URL_RE.search(clause):
            continue
        if FOLLOW_ON.search(clause) and index > 0:
            framed.append(index)
            continue  # it scales the result before it: a derived task (see derive)
        before = len(tasks)
        if _frame_tasks(question, clauses, index, tasks, add):
            framed.append(index)
            calculated.update(index for task in list(tasks.values())[before:] if task.kind == "calc")
        else:
            entity = _other_task(question, clause, history, entity, add)

    question.tasks = list(tasks.values())
    extra = derived(clauses, question.tasks, lambda key, kind, params, needs: Task(key, kind, params, needs=needs))
    question.tasks += extra
    question.unhandled += [clauses[i] for i in framed
                           if i not in calculated and _unmapped_operation(clauses[i], bool(extra))]
    weather = [t for t in question.tasks if t.kind == "weather"]
    if question.compare is None and len(weather) >= 2 and COMPARE.search(norm):
        question.compare = "cold" if COLD.search(norm) else "hot"
    if len(weather) < 2:
        question.compare = None
    return question


def _unmapped_operation(clause: str, derived_parts: bool) -> bool:
    """The clause combines results ("then add …", "…乘以 3") in a way no calculation or derived part took up:
    answering its other parts alone would leave it unanswered."""
    if not _OPERATION.search(clause) and not FOLLOW_ON.search(clause):
        return False
    return not (derived_parts and any(cue.search(clause) for cue in (DIFF, RATIO, MORE, FOLLOW_ON)))


def _frame_tasks(question: Question, clauses: list[str], index: int, tasks: dict[str, Task], add: Any) -> bool:
    """The weather, time and arithmetic a clause asks for (one clause may ask for several); False if none."""
    clause = clauses[index]
    handled = False
    if WEATHER.search(clause) or (COMPARE.search(clause) and find_cities(clause)):
        # "北京现在几点？天气怎么样？": a clause without a city means the one named just before.
        earlier = [c.name(question.lang) for _, _, c in find_cities(" ".join(clauses[:index]))]
        for city in weather_cities(clause) or earlier or [""]:
            add(Task(f"weather:{city}", "weather", {"city": city}))
        handled = True
        if COMPARE.search(clause):
            question.compare = "cold" if COLD.search(clause) else "hot"
    if TIME.search(clause):
        earlier_places = [(c.name(question.lang), c.tz) for _, _, c in find_cities(" ".join(clauses[:index]))]
        for name, tz in time_places(clause) or earlier_places or [("", "")]:
            add(Task(f"time:{tz or 'local'}", "time", {"city": name, "tz": tz}))
        handled = True
    expression = calc_expression(clause, other_frames=handled)
    if expression:
        add(Task(f"calc:{expression}", "calc", {"expression": expression}))
        handled = True
    if not handled and COMPARE.search(clause) and any(t.kind == "weather" for t in tasks.values()):
        question.compare = "cold" if COLD.search(clause) else "hot"
        handled = True
    return handled


def _other_task(question: Question, clause: str, history: Sequence[str], entity: str, add: Any) -> str:
    """A clause no frame handles: a follow-up, a fact to look up, or left unhandled. Returns the entity later
    clauses' pronouns refer to."""
    if is_creative(clause) or SMALL_TALK.match(clause):
        question.unhandled.append(clause)
        return entity
    if history and find_cities(clause) and _follow_up(question, clause, history, add):
        return entity
    if QUESTION.search(clause) or latin_terms(clause) or english_entity(clause):
        query = _resolve_pronouns(clean_query(clause), entity or _context_entity(history))
        if query:
            add(Task(f"fact:{query}", "fact", {"query": query, "clause": clause,
                                               "name_wanted": bool(WHO_DID.search(clause))}))
            return entity or core_entity(query)
    question.unhandled.append(clause)
    return entity


def _follow_up(question: Question, clause: str, history: Sequence[str], add: Any) -> bool:
    """"那上海呢？" after a weather or time question: the same kind of task for the newly named cities."""
    kinds = {t.kind for t in decompose(history[-1]).tasks}
    for _, _, city in find_cities(clause):
        name = city.name(question.lang)
        if "weather" in kinds:
            add(Task(f"weather:{name}", "weather", {"city": name}))
        if "time" in kinds:
            add(Task(f"time:{city.tz}", "time", {"city": name, "tz": city.tz}))
    return bool(kinds & {"weather", "time"})

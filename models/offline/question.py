"""Decomposing a question into sub-tasks for the built-in tools: weather, time, arithmetic, search and chains.

The question is split into clauses, and each clause's cues say which built-in task it asks for and which slots it
fills: the cities of a weather clause, the places of a time clause, the expression of a calculation, the search key
words of a fact with question words and fillers stripped (and, for fallbacks, its core entity and an English
rephrasing). A multi-step question (who holds a role, when something began, how long ago, how much accumulated
since) is read across its sentences as one chain whose pronouns link the steps. Parts computed from other parts, a
temperature difference or a comparison, are added where a clause asks for them, and a sentence that no built-in
tool can answer is kept as unhandled, so that the answer reports it missing instead of dropping it.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .compute import DIFF, FOLLOW_ON, MORE, RATIO, derived, find_expression
from .places import (
    COMPARE,
    OTHER_DAY,
    QUESTION,
    TIME,
    WEATHER,
    described_place,
    follow_up_place,
    places_named,
    refers_back,
    time_places,
    weather_cities,
)
from .words import (
    ENTITY_ALIASES,
    KEYWORDS_EN,
    PRONOUNS,
    URL_RE,
    english_entity,
    find_cities,
    has_cjk,
    is_founding,
    language_of,
    latin_terms,
    looks_like_person,
    lookup_city,
    normalize,
    word_list,
)

CALC_INTENT = re.compile(r"计算|算一下|算算|等于|多少|几|结果|求|\b(?:calculate|compute|evaluate|what is|what's|"
                         r"how much|equals?|result|solve)\b|=", re.I)
CREATIVE = re.compile(r"^(?:请|帮我|给我|能不能|可以|你能)?\s*(?:写|作|编|创作|画|唱|翻译)(?:一|个|首|篇|段|幅|下|几)|"
                      r"笑话|一首诗|写诗|作诗|写一首|讲个故事|\b(?:tell|write|compose|make up|sing|draw|"
                      r"translate)\b.{0,20}\b(?:jokes?|poems?|story|stories|songs?|haiku|essay|letter)\b|"
                      r"^(?:write|compose|translate|draw|sing)\b", re.I)
# "谁创造了 Python" / "who founded NVIDIA" want a name; "谁是 Elon Musk" / "who is Linus" want a description.
WHO_DID = re.compile(r"谁(?!是)[^?？]{0,3}?(?:创|发明|开发|写|设计|建|成立|提出|发现|领导|执掌|经营|拥有)|"
                     r"\bwho\s+(?!is\b|are\b|was\b|were\b)[a-z]+", re.I)
# A question about what has not happened yet (a price next week, the next draw's numbers).
FUTURE = re.compile(r"明天|后天|下周|下星期|下个?月|明年|下一期|下一届|下次|将来|未来|会是|会不会|\b(?:tomorrow|next "
                    r"(?:week|month|year|time|draw|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
                    r"in the future|will (?:be|win|happen|become|cost))\b", re.I)
SMALL_TALK = re.compile(r"^(?:你好|您好|嗨|哈喽|谢谢|多谢|再见|hi|hello|hey|thanks|thank you|bye|ok|好的)\W*$", re.I)

_ZH_FILLER: tuple[str, ...] = tuple(word_list("fillers_zh"))  # longest first where one contains another
_EN_STOP = frozenset(word_list("stop_words_en"))
COLD = re.compile(r"冷|凉|温度低|气温低|更低|\b(?:colder|cooler|coldest|coolest|lower)\b", re.I)


def calc_expression(clause: str, other_frames: bool) -> str | None:
    """The arithmetic a clause asks for: an expression with calculation intent (or a bare expression)."""
    expression = find_expression(clause)
    if not expression:
        return None
    bare = len(re.sub(r"[\s\d.+\-*/()%^×÷=?？（）＋－＊／]", "", clause)) <= max(2, len(clause) // 3)
    if re.search(r"计算|算一下|算算|calculate|compute|evaluate", clause, re.I):
        return expression
    if other_frames:
        return None
    return expression if bare or CALC_INTENT.search(clause) else None


_LIST_SEPARATOR = re.compile(r"\s*(?:[,，、;；]|\band\b|和|以及|还有)\s*", re.I)


def calc_expressions(clause: str, other_frames: bool) -> list[str]:
    """Every calculation a clause asks for: "calculate 12 * 7, 45 + 67 and 2 ** 10" is three, each its own part
    (one expression for the whole clause would drop the others without a word)."""
    whole = calc_expression(clause, other_frames)
    if not whole:
        return []
    pieces = [p for p in _LIST_SEPARATOR.split(clause) if p.strip()]
    found = [e for p in pieces if (e := find_expression(p)) and len(re.sub(r"[\s\d.]", "", e)) > 0]
    return list(dict.fromkeys(found)) if len(found) > 1 else [whole]


def is_creative(text: str) -> bool:
    return bool(CREATIVE.search(text.strip()))


def clean_query(clause: str) -> str:
    """The search key words of a clause: question words, fillers and punctuation stripped."""
    text = re.sub(r"[?？!！。,，;；:：、\"“”'‘’《》()（）\[\]]", " ", clause)
    if has_cjk(text):
        for word in _ZH_FILLER:
            text = text.replace(word, " ")
        return re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"\b(?:the\s+)?((?:current\s+|present\s+)?(?:CEO|founder|co-founder|chairman|president|creator|"
                  r"inventor|author|chief executive))\s+of\s+(?:the\s+)?([A-Za-z][\w&.\-]*(?: [A-Z][\w&.\-]*)*)",
                  r"\2 \1", text, flags=re.I)
    text = re.sub(r"'s\b", "", text)
    words = [w for w in text.split() if w.lower() not in _EN_STOP]
    return " ".join(words).strip()


def core_entity(query: str) -> str:
    """The entity at the heart of a query (LangChain, Tim Cook, 苹果公司): the shortest useful rephrasing."""
    terms = [re.sub(r"^(?:[a-z][\w'-]*\s+)+(?=[A-Z])", "", t) for t in latin_terms(query)]
    terms = [re.sub(r"\s*\b(?:CEO|CTO|CFO|Founder|President|Chairman)\b\s*", " ", t).strip() or t for t in terms]
    named = [t for t in terms if t[:1].isupper() and t.lower() not in {"ceo", "founder", "current", "born"}] or \
        [t for t in terms if t.lower() not in {"ceo", "founder", "current", "born", "released"} and len(t) > 1]
    if named:
        return " ".join(named[:2])
    for alias in sorted(ENTITY_ALIASES, key=len, reverse=True):
        if alias in query:
            return alias
    tokens = sorted(query.split(), key=len, reverse=True)
    return tokens[0] if tokens else ""


def english_query(query: str) -> str:
    """A Chinese query rephrased with English key words (苹果公司 现任 CEO -> Apple current CEO)."""
    if not has_cjk(query):
        return query
    words: list[str] = []
    for token in query.split():
        if not has_cjk(token):
            words.append(token)
            continue
        entity = english_entity(token)
        if entity:
            words.append(entity)
        words.extend(en for zh, en in KEYWORDS_EN.items() if zh in token and en not in words)
    return " ".join(dict.fromkeys(w for w in words if w)).strip()


def subject_of(clause: str, strip: re.Pattern[str]) -> str:
    """The entity a clause is about once the cue words are stripped; "" for a pronoun or nothing left."""
    text = strip.sub(" ", clause)
    text = clean_query(text)
    latin = [t for t in latin_terms(text) if t.lower() not in PRONOUNS]
    if latin:
        return " ".join(latin)
    entity = next((a for a in sorted(ENTITY_ALIASES, key=len, reverse=True) if a in text), None)
    if entity:
        return entity
    tokens = [t for t in re.findall(r"[\u4e00-\u9fff·]+", text) if t not in PRONOUNS and len(t) >= 2]
    return tokens[0] if tokens and len(tokens[0]) <= 8 else ""


def is_city(name: str) -> bool:
    return lookup_city(name) is not None


_ROLE_NOUNS = ((r"创造|创建|created|creat", "creator"), (r"创立|创办|成立|found", "founder"),
               (r"发明|invent", "inventor"), (r"开发|develop", "developer"), (r"写|wrote|write|author", "author"),
               (r"设计|design", "designer"))


def role_query(clause: str, core: str) -> str:
    """"NVIDIA founder" for "Who founded NVIDIA?": the entity plus the role a who-did question asks about."""
    for pattern, noun in _ROLE_NOUNS:
        if re.search(pattern, clause, re.I):
            return f"{core} {noun}"
    return ""


ROLE = re.compile(r"CEO|首席执行官|执行长|总裁|董事长|创始人|创办人|掌门人|负责人|\b(?:founder|co-founder|"
                  r"chief executive|president|chairman)\b", re.I)
WHO = re.compile(r"是谁|谁是|叫什么|名字|哪位|\bwho\b|\bname\b", re.I)
AGE = re.compile(r"多少岁|几岁|年龄|年纪|多大了|多大年纪|\bhow old\b|\bwhat age\b|\bage\b", re.I)
ORIGIN_VERB = re.compile(r"诞生|发布|问世|推出|创建|创立|创办|成立|出生|发明|上市|首发|面世|\b(?:created|released|"
                         r"born|founded|launched|invented|introduced|established|developed|published|"
                         r"first appeared|came out)\b", re.I)
WHEN = re.compile(r"哪一年|哪年|什么时候|何时|几几年|哪一天|年份|日期|\bwhen\b|\bwhat year\b|\bwhich year\b|"
                  r"\bin what year\b|\bdate\b", re.I)
ELAPSED = re.compile(r"多少年|几年|多久|\bhow many years\b|\bhow long\b|\byears ago\b", re.I)
NOW = re.compile(r"现在|今年|目前|至今|如今|当前|今天|\b(?:now|today|this year|currently|so far|to date)\b", re.I)
YEAR = re.compile(r"(?<![\d.])(1[5-9]\d{2}|2[01]\d{2})(?![\d.])")
_ZH_RATE = re.compile(r"每(天|日|周|星期|月|年)\s*(?:都|坚持|大约|约)?\s*([\u4e00-\u9fff]{0,2}?)\s*(\d+(?:\.\d+)?)\s*"
                      r"([\u4e00-\u9fff]{1,4}|[A-Za-z]+)?")
_EN_RATE = re.compile(r"\b(?:(writes?|wrote|reads?|runs?|ran|saves?|saved|walks?|walked|drinks?|makes?|made)\s+)?"
                      r"(\d+(?:\.\d+)?)\s+"
                      r"([a-z][a-z ]{0,25}?)\s+(?:per|every|each|a)\s+(day|week|month|year)\b", re.I)
_EN_RATE_PRE = re.compile(r"\b(?:every|each|per)\s+(day|week|month|year)\b[^.?!]{0,30}?\b(writes?|reads?|runs?|"
                          r"saves?|walks?)?\s*(\d+(?:\.\d+)?)\s+([a-z][a-z ]{0,25}?)(?=[,.?!]|$|\s+(?:for|until|"
                          r"since|from|how|in)\b)", re.I)
_CUES = re.compile(rf"{ORIGIN_VERB.pattern}|{WHEN.pattern}|{AGE.pattern}|{ELAPSED.pattern}|{NOW.pattern}|"
                   r"于|是|在|到|已经|已|了|那年|开始|从|如果|一共|总共|\d{4}\s*年?|\b(?:was|were|is|has|have|it|"
                   r"been|first|ago|since|by|until|as of|old)\b", re.I)
_PERIODS: dict[str, str] = word_list("periods")


@dataclass
class Chain:
    """The slots of a who -> when -> how-long -> how-much question, filled from the clauses that ask them."""

    who_query: str = ""
    who_clause: str = ""
    subject: str = ""  # "" when the subject is the person the who-step finds
    verb: str = ""
    birth: bool = False
    asks_origin: bool = False
    age: bool = False
    elapsed: bool = False
    target_year: int | None = None
    rate: dict[str, Any] | None = None
    clauses: list[int] = field(default_factory=list)

    @property
    def needs_origin(self) -> bool:
        return self.asks_origin or self.age or self.elapsed or self.rate is not None


def _rate(text: str) -> dict[str, Any] | None:
    zh = _ZH_RATE.search(text)
    if zh:
        period = _PERIODS[zh.group(1)]
        rate = {"period": period, "verb": zh.group(2) or "", "amount": zh.group(3), "unit": zh.group(4) or ""}
    else:
        en = _EN_RATE.search(text)
        pre = None if en else _EN_RATE_PRE.search(text)
        if en:
            rate = {"period": en.group(4).lower(), "verb": en.group(1) or "", "amount": en.group(2),
                    "unit": en.group(3).strip()}
        elif pre:
            rate = {"period": pre.group(1).lower(), "verb": pre.group(2) or "", "amount": pre.group(3),
                    "unit": pre.group(4).strip()}
        else:
            return None
    days = re.search(r"每年\s*(?:按)?\s*(\d{3})\s*天|(\d{3})\s*days?\s*(?:per|a|each|in a|in each)\s*year", text, re.I)
    per_year = {"day": 365, "week": 52, "month": 12, "year": 1}[rate["period"]]
    rate["per_year"] = int(days.group(1) or days.group(2)) if days and rate["period"] == "day" else per_year
    rate["assumed"] = rate["period"] == "day" and not days
    if not re.search(r"一共|总共|共|累计|合计|总计|\btotal\b|\baltogether\b|\bin all\b|多少|\bhow many\b|\bhow much\b",
                     text, re.I):
        return None
    return rate


def find_chain(clauses: list[str]) -> Chain | None:
    """The chain a question asks for across its sentences (pronouns link them), or None."""
    chain = Chain()
    # "Who founded Linux? How old is he?": a who-did question starts the chain when a later clause asks the
    # person's age or beginning (alone it stays a fact to look up).
    person_asked = any(AGE.search(c) or (ORIGIN_VERB.search(c) and WHEN.search(c)) for c in clauses[1:])
    for index, clause in enumerate(clauses):
        is_who = bool(WHO.search(clause) and (ROLE.search(clause) or (person_asked and WHO_DID.search(clause))))
        is_age = bool(AGE.search(clause))
        is_origin = bool(ORIGIN_VERB.search(clause) and WHEN.search(clause))
        is_elapsed = bool(ELAPSED.search(clause)) and not is_age
        rate = _rate(clause)
        if not (is_who or is_age or is_origin or is_elapsed or rate):
            continue
        if (is_elapsed or rate) and not (is_origin or chain.needs_origin or ORIGIN_VERB.search(clause)
                                           or is_age or chain.who_query):
            continue  # "how many years" with nothing that began: not this kind of question
        chain.clauses.append(index)
        if is_who and not chain.who_query:
            chain.who_query, chain.who_clause = clean_query(clause), clause
        if is_age or is_origin or is_elapsed or (rate and not (chain.subject or chain.who_query)):
            subject = "" if is_who else subject_of(clause, _CUES)
            if subject and not chain.subject and not chain.who_query:
                chain.subject = subject
            verb = ORIGIN_VERB.search(clause)
            if verb and not chain.verb:
                chain.verb = verb.group(0)
        chain.asks_origin |= is_origin
        chain.age |= is_age
        chain.elapsed |= is_elapsed
        chain.rate = chain.rate or rate
        year = YEAR.search(re.sub(r"\d+\s*(?:行|个|天|days?|lines?)", "", clause))
        if year and (is_elapsed or is_age or rate) and chain.target_year is None:
            chain.target_year = int(year.group(1))
    if not chain.clauses:
        return None
    if chain.needs_origin and not (chain.subject or chain.who_query):
        return None
    chain.birth = chain.age or bool(chain.verb and re.match(r"出生|born", chain.verb, re.I))
    if not chain.verb:
        chain.verb = "出生" if chain.birth else "诞生"
    return chain


def origin_query(entity: str, verb: str, lang: str) -> str:
    """Search words for when an entity began: "Python 诞生", "Tim Cook 出生", "Linux released"."""
    chinese_verb = bool(re.search(r"[\u4e00-\u9fff]", verb))
    if lang == "zh":
        return f"{entity} {verb if chinese_verb else ('出生' if verb.lower() == 'born' else '诞生')}"
    if chinese_verb:
        return f"{entity} {'born' if verb == '出生' else 'released'}"
    return f"{entity} {verb.lower()}"


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
    unresolved: list[str] = field(default_factory=list)  # those of them that refer back to a place never named
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


def resolve_pronouns(query: str, entity: str) -> str:
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
    """Sub-tasks of a question, in the order they should be reported; earlier questions give context only.

    The model reads the same question again at every step of a turn (5–6 times in a ReAct run), and reading it is
    most of a step's work (0.2–0.3 ms); the reading depends on the text and the history alone, so it is kept, and
    each caller gets a copy of its own (20 µs) to change as it likes."""
    return copy.deepcopy(_decompose(text, tuple(history)))


@functools.lru_cache(maxsize=256)
def _decompose(text: str, history: tuple[str, ...]) -> Question:
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
            continue  # it scales the result before it: a derived task (see compute.derived)
        before = len(tasks)
        if _frame_tasks(question, clauses, index, tasks, add, history):
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


def _frame_tasks(question: Question, clauses: list[str], index: int, tasks: dict[str, Task], add: Any,
                 history: Sequence[str] = ()) -> bool:
    """The weather, time and arithmetic a clause asks for (one clause may ask for several); False if none."""
    clause = clauses[index]
    handled = False
    # "北京现在几点？天气怎么样？": a clause without a place means the ones named just before; "…there?" may mean
    # the previous question's. A reference to no place at all, or to one another part's result would pick ("the
    # colder one"), is a part of its own, reported missing.
    described = described_place(clause)
    back = refers_back(clause) or described
    earlier = [] if described else _earlier_places(question.lang, clauses[:index], history if back else ())
    unresolved = False
    if WEATHER.search(clause) and OTHER_DAY.search(clause):  # another day's weather: no tool has it
        question.unhandled.append(clause)
        handled = True
    elif WEATHER.search(clause) or (COMPARE.search(clause) and find_cities(clause)):
        cities = ([] if described else weather_cities(clause)) or [name for name, _ in earlier]
        unresolved = back and not cities
        for city in cities or ([""] if not back else []):
            add(Task(f"weather:{city}", "weather", {"city": city}))
        handled = True
        if COMPARE.search(clause):
            question.compare = "cold" if COLD.search(clause) else "hot"
    if TIME.search(clause):
        places = ([] if described else time_places(clause)) or earlier
        unresolved |= back and not places
        for name, tz in places or ([("", "")] if not back else []):
            add(Task(f"time:{tz or 'local'}", "time", {"city": name, "tz": tz}))
        handled = True
    if unresolved:
        question.unhandled.append(clause)
        question.unresolved.append(clause)
    for expression in calc_expressions(clause, other_frames=handled):
        add(Task(f"calc:{expression}", "calc", {"expression": expression}))
        handled = True
    if not handled and COMPARE.search(clause) and any(t.kind == "weather" for t in tasks.values()):
        question.compare = "cold" if COLD.search(clause) else "hot"
        handled = True
    return handled


def _earlier_places(lang: str, before: Sequence[str], history: Sequence[str]) -> list[tuple[str, str]]:
    """The places the question named before a clause, else (for a clause that refers back) the last question's."""
    return places_named(before, lang) or (places_named(history[-1:], lang) if history else [])


def _other_task(question: Question, clause: str, history: Sequence[str], entity: str, add: Any) -> str:
    """A clause no frame handles: a follow-up, a fact to look up, or left unhandled. Returns the entity later
    clauses' pronouns refer to."""
    if is_creative(clause) or SMALL_TALK.match(clause):
        question.unhandled.append(clause)
        return entity
    if history and (find_cities(clause) or follow_up_place(clause)) and _follow_up(question, clause, history, add):
        return entity
    if FUTURE.search(clause):  # what has not happened yet is in no knowledge base: a part no tool answers
        question.unhandled.append(clause)
        return entity
    if QUESTION.search(clause) or latin_terms(clause) or english_entity(clause):
        query = resolve_pronouns(clean_query(clause), entity or _context_entity(history))
        if query:
            add(Task(f"fact:{query}", "fact", {"query": query, "clause": clause,
                                               "name_wanted": bool(WHO_DID.search(clause))}))
            return entity or core_entity(query)
    question.unhandled.append(clause)
    return entity


def _follow_up(question: Question, clause: str, history: Sequence[str], add: Any) -> bool:
    """"那上海呢？" after a weather or time question: the same kind of task for the newly named places (a place
    the gazetteer lacks is asked about as written, never answered with another's data)."""
    kinds = {t.kind for t in decompose(history[-1]).tasks}
    places = [(city.name(question.lang), city.tz) for _, _, city in find_cities(clause)]
    if not places and (place := follow_up_place(clause)):
        places = [(place, place)]
    for name, tz in places:
        if "weather" in kinds:
            add(Task(f"weather:{name}", "weather", {"city": name}))
        if "time" in kinds:
            add(Task(f"time:{tz}", "time", {"city": name, "tz": tz}))
    return bool(kinds & {"weather", "time"})

"""Multi-step questions: who holds a role, when something began, how long ago, and what accumulated since."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .frames import clean_query, subject_of
from .vocabulary import word_list

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
    for index, clause in enumerate(clauses):
        is_who = bool(ROLE.search(clause) and WHO.search(clause))
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

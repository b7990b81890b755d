"""The words the scripted offline model knows, and how it reads text with them.

Its word lists and its city gazetteer live in data/words.json and data/cities.json (shipped in the wheel, read
once); they may grow while the rules stay. With them it reads the user's text: the language a question is written
in (any CJK character makes it Chinese, and the answer follows the question), the cities it names (the longest of
overlapping names wins), the organisations and people it mentions with the English key words a search index knows,
all after normalising the text so that full-width digits read as ASCII and 10³ as a power (not as 103). With the
same words it reads the facts in a tool result's text: a year or date beside the words for the event the question
names (a person's birthday, not the release date of something they made), a person's name beside a role word rather
than a predecessor's, a temperature in a weather snippet, the hits of a search that found something, and today's
date from a get_time result.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from reactgraph.tools.builtin.calculator_notation import superscripts_as_powers

_DATA = Path(__file__).with_name("data")


@cache
def _data_file(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((_DATA / f"{name}.json").read_text(encoding="utf-8"))
    return data


def word_list(name: str) -> Any:
    """One word list of words.json (a list, or a mapping from a word to its meaning)."""
    return _data_file("words")[name]


def city_rows() -> list[dict[str, Any]]:
    """The gazetteer of cities.json: each row's Chinese and English names, time zone and other names."""
    rows: list[dict[str, Any]] = _data_file("cities")["cities"]
    return rows


# Organisations, people and products as users write them -> the English key word a search index knows.
ENTITY_ALIASES: dict[str, str] = word_list("entity_aliases")

# Chinese relation words -> English key words, for rephrasing a search in English.
KEYWORDS_EN: dict[str, str] = word_list("keywords_en")

PRONOUNS = frozenset(word_list("pronouns"))

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
URL_RE = re.compile(r"https?://[^\s，。！？、;；\"'<>()（）]+", re.I)


@dataclass(frozen=True)
class City:
    """A gazetteer entry: the names a user may write and the zone its clock runs in."""

    zh: str
    en: str
    tz: str
    aliases: tuple[str, ...]

    def name(self, lang: str) -> str:
        return self.zh if lang == "zh" else self.en


def count_cjk(text: str) -> int:
    """How many CJK characters `text` holds."""
    return len(_CJK.findall(text))


def has_cjk(text: str) -> bool:
    return bool(_CJK.search(text or ""))


def language_of(text: str) -> str:
    """"zh" when the text contains any CJK character, else "en": answers follow the question."""
    return "zh" if has_cjk(text) else "en"


def normalize(text: str) -> str:
    """NFKC (full-width digits, letters and operators become ASCII) with collapsed whitespace; superscripts
    are powers first (NFKC alone would read 10³ as 103)."""
    text = unicodedata.normalize("NFKC", superscripts_as_powers(text or ""))
    return re.sub(r"[ \t\u3000]+", " ", text).strip()


@lru_cache(maxsize=1)
def cities() -> tuple[City, ...]:
    return tuple(City(row["zh"], row["en"], row["tz"], (row["zh"], row["en"], *row["aliases"]))
                 for row in city_rows())


@lru_cache(maxsize=1)
def _city_patterns() -> tuple[re.Pattern[str], re.Pattern[str], dict[str, City]]:
    index: dict[str, City] = {}
    for city in cities():
        for alias in city.aliases:
            index[alias.lower()] = city
    cjk = sorted((a for a in index if has_cjk(a)), key=len, reverse=True)
    latin = sorted((a for a in index if not has_cjk(a)), key=len, reverse=True)
    cjk_re = re.compile("|".join(map(re.escape, cjk)))
    latin_re = re.compile(r"(?<![A-Za-z])(?:" + "|".join(map(re.escape, latin)) + r")(?![A-Za-z])", re.I)
    return cjk_re, latin_re, index


def find_cities(text: str) -> list[tuple[int, int, City]]:
    """Gazetteer cities in order of appearance as (start, end, city); overlapping names keep the longest."""
    cjk_re, latin_re, index = _city_patterns()
    hits = [(m.start(), m.end(), index[m.group(0).lower()]) for m in cjk_re.finditer(text)]
    hits += [(m.start(), m.end(), index[m.group(0).lower()]) for m in latin_re.finditer(text)]
    hits.sort(key=lambda h: (h[0], -(h[1] - h[0])))
    kept: list[tuple[int, int, City]] = []
    for hit in hits:
        if kept and hit[0] < kept[-1][1]:
            continue
        kept.append(hit)
    return kept


def lookup_city(name: str) -> City | None:
    return _city_patterns()[2].get((name or "").strip().lower())


def english_entity(text: str) -> str | None:
    """The English name of a known organisation or person mentioned in `text`, if any."""
    for alias in sorted(ENTITY_ALIASES, key=len, reverse=True):
        if alias in text:
            return ENTITY_ALIASES[alias]
    return None


def latin_terms(text: str) -> list[str]:
    """Latin-script words and names (LangChain, Tim Cook, NVIDIA) in order: the core of most queries."""
    return [m.group(0).strip() for m in re.finditer(r"[A-Za-z][A-Za-z0-9.+#'_-]*(?: [A-Z][A-Za-z0-9.+#'_-]*)*",
                                                    text)]


_MONTH_NAMES: tuple[str, ...] = tuple(word_list("month_names"))
_MONTHS = {m.lower(): i + 1 for i, m in enumerate(_MONTH_NAMES)}
_MONTHS.update({m[:3]: i for m, i in list(_MONTHS.items())})
_MONTH_RE = "|".join(sorted(_MONTHS, key=len, reverse=True))

BIRTH_WORDS = r"出生|生于|生日|诞辰|born|birth"
ORIGIN_WORDS = (r"诞生|发布|推出|问世|创建|创立|创办|成立|首次|首个|发明|公开|面世|上线|released|release|created|"
                r"founded|launched|introduced|invented|first|debuted|appeared|established|announced")
# Role words by the role a question asks about: the person named next to *that* word is the answer.
ROLES: dict[str, str] = {
    "ceo": r"CEO|首席执行官|执行长|chief executive",
    "founder": r"创始人|创办人|创立|创办|成立|founder|founded|co-founded|founding",
    "creator": r"创造|创建|发明|开发|作者|creator|created|invented|inventor|developed|developer|author|wrote|由",
    "president": r"总裁|president",
    "chairman": r"董事长|chairman",
}
ROLE_WORDS = "|".join(ROLES.values())
_PREDECESSOR = r"(?:接替|接任|继任|前任|取代|succeed(?:ed|ing|s)?|replac(?:ed|ing|es)|former|late|after)\s*$"
_NAME_STOP = frozenset(word_list("not_name_words"))
_LIFESPAN = re.compile(rf"\s*[－–—~-]\s*(?:\d|{'|'.join(_MONTH_NAMES)})")


def mentions_role(hit: dict[str, Any], role: str) -> bool:
    """Whether a hit names the role ("" asks for none): a name beside no role word is not the role's holder."""
    return not role or bool(re.search(ROLES[role], _text(hit), re.I))


def role_of(text: str) -> str:
    """Which role a question asks about (ceo, founder, creator, president, chairman); "" if none."""
    for role, words in ROLES.items():
        if re.search(words, text, re.I):
            return role
    return ""


@dataclass(frozen=True)
class DateFact:
    """A year (with month and day when the text gives them) read from a snippet."""

    year: int
    month: int | None = None
    day: int | None = None
    source: str = ""
    snippet: str = ""

    def render(self, lang: str) -> str:
        if lang == "zh":
            return f"{self.year}年" + (f"{self.month}月" if self.month else "") + (f"{self.day}日" if self.day else "")
        if self.month and self.day:
            return f"{_MONTH_NAMES[self.month - 1]} {self.day}, {self.year}"
        return f"{_MONTH_NAMES[self.month - 1]} {self.year}" if self.month else str(self.year)


@dataclass(frozen=True)
class Person:
    """A person named in a snippet, with the other-script form of the name when the text gives it."""

    name: str
    alt: str = ""
    source: str = ""
    snippet: str = ""

    def render(self, lang: str) -> str:
        if lang == "zh" and self.alt:
            return f"{self.alt}（{self.name}）"
        return self.name


def hits(data: Any) -> list[dict[str, Any]]:
    """The results of a search observation that found something; [] when it found nothing."""
    if not isinstance(data, dict) or data.get("found") is False:
        return []
    results = data.get("results") or []
    return [r for r in results if isinstance(r, dict) and (r.get("snippet") or r.get("title"))]


def _text(hit: dict[str, Any]) -> str:
    return f"{hit.get('title', '')}。{hit.get('snippet', '')}"


def _dates(text: str) -> list[tuple[int, int, DateFact]]:
    found: list[tuple[int, int, DateFact]] = []
    spans: list[tuple[int, int]] = []

    def add(match: re.Match[str], year: int, month: int | None, day: int | None) -> None:
        if any(s <= match.start() < e for s, e in spans) or not 1000 <= year <= 2100:
            return
        spans.append((match.start(), match.end()))
        found.append((match.start(), match.end(), DateFact(year, month, day)))

    for m in re.finditer(r"(\d{4})\s*年\s*(\d{1,2})\s*月\s*(\d{1,2})\s*日", text):
        add(m, int(m.group(1)), int(m.group(2)), int(m.group(3)))
    for m in re.finditer(r"(\d{4})\s*年\s*(\d{1,2})\s*月", text):
        add(m, int(m.group(1)), int(m.group(2)), None)
    for m in re.finditer(rf"\b({_MONTH_RE})\.?\s+(\d{{1,2}}),?\s+(\d{{4}})", text, re.I):
        add(m, int(m.group(3)), _MONTHS[m.group(1).lower()], int(m.group(2)))
    for m in re.finditer(rf"\b(\d{{1,2}})\s+({_MONTH_RE})\.?,?\s+(\d{{4}})", text, re.I):
        add(m, int(m.group(3)), _MONTHS[m.group(2).lower()], int(m.group(1)))
    for m in re.finditer(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)", text):
        add(m, int(m.group(1)), int(m.group(2)), int(m.group(3)))
    for m in re.finditer(r"(?<![\d.])(1\d{3}|20\d{2})(?!\d)(?!\.\d)", text):
        add(m, int(m.group(1)), None, None)
    return found


def _distance(start: int, end: int, text: str, words: str) -> int | None:
    gaps = [max(k.start() - end, start - k.end(), 0) for k in re.finditer(words, text, re.I)]
    return min(gaps) if gaps else None


def looks_like_person(name: str) -> bool:
    """"Tim Cook", "Guido van Rossum", "埃隆·马斯克": a person's name rather than a product or company."""
    return bool(re.fullmatch(r"[A-Z][a-z]+(?:\s+(?:van|von|de|der|da|di|del|le|la)?\s*[A-Z][a-z]+)+", name.strip())
                or "·" in name)


def _mentions(text: str, names: tuple[str, ...]) -> bool:
    return any(n and n.lower() in text.lower() for n in names)


_VERB_GROUPS = (r"成立|创立|创办|创建|founded|established|co-founded",
                r"发布|推出|问世|首次|面世|上线|上市|首发|released|launched|introduced|debuted|came out|first",
                r"创造|创建|发明|开发|created|invented|developed")


def is_founding(verb: str) -> bool:
    """Whether the verb founds something ("founded", "成立"): what is founded is an organisation, not a person."""
    return _verb_words(verb) == _VERB_GROUPS[0]


def _verb_words(verb: str) -> str | None:
    """The words a snippet uses for the event the question names (成立 ~ founded, 发布 ~ released)."""
    return next((group for group in _VERB_GROUPS if verb and re.fullmatch(group, verb, re.I)), None)


def find_date(results: list[dict[str, Any]], birth: bool, person: bool = False,
              names: tuple[str, ...] = (), verb: str = "") -> DateFact | None:
    """The date an entity came into being (or a person was born) from search hits.

    A person's date must come from a hit that names them and sit next to a birth word (or open a lifespan
    "1955年2月24日－2011年10月5日"): the year a product they made was released is not their birthday. For a
    thing, the earliest year next to a release word wins ("first version 1991 … Python 2.0 in 2000").
    """
    keyword_sets = [BIRTH_WORDS] if person else [BIRTH_WORDS, ORIGIN_WORDS] if birth else [ORIGIN_WORDS, BIRTH_WORDS]
    specific = None if birth or person else _verb_words(verb)
    if specific:
        keyword_sets.insert(0, specific)
    for words in keyword_sets:
        limit = 60 if words is specific else 25
        for hit in results:
            text = _text(hit)
            if person and names and not _mentions(text, names):
                continue
            scored = []
            for start, end, fact in _dates(text):
                gap = _distance(start, end, text, words)
                if person and fact.month and _LIFESPAN.match(text, end):
                    gap = 0
                if words is not BIRTH_WORDS and gap is not None:
                    birth_gap = _distance(start, end, text, BIRTH_WORDS)
                    if birth_gap is not None and birth_gap < gap:
                        continue  # "(Linus Torvalds, born 1969) … first released 1991": 1969 is a birthday
                if gap is not None and gap <= limit:
                    earliest = fact.year if words is not BIRTH_WORDS else 0
                    scored.append((earliest, gap, -(fact.month is not None), start, fact))
            subject = "|".join(re.escape(n) for n in names if n)
            if subject and not person:
                # A snippet may date several things ("OpenAI was founded in 2015 … ChatGPT, launched 2022").
                near = [c for c in scored if (_distance(c[3], c[3] + 4, text, subject) or 0) <= 40]
                scored = near or scored
            if scored:
                fact = min(scored, key=lambda s: s[:4])[4]
                return DateFact(fact.year, fact.month, fact.day, str(hit.get("source", "")), text)
    return None


def _candidates(text: str, excluded: set[str], role_words: str) -> list[tuple[int, int, str, str]]:
    found: list[tuple[int, int, str, str]] = []
    for m in re.finditer(r"[A-Z][a-z]+(?:\s+(?:van|von|de|der|da|di|del|le|la)?\s*[A-Z][a-z]+)+", text):
        words = m.group(0).split()
        if any(w in _NAME_STOP or w.lower() in excluded or w.lower() in _MONTHS for w in words):
            continue
        found.append((m.start(), m.end(), m.group(0), _adjacent_cjk_name(text, m.start(), m.end())))
    for m in re.finditer(r"[\u4e00-\u9fff]{1,5}·[\u4e00-\u9fff]{1,6}", text):
        name = _transliteration(m.group(0))
        if not any(alt == name for _, _, _, alt in found) and name not in excluded:
            found.append((m.start(), m.end(), name, ""))
    if not found:
        named = rf"(?:{role_words})[^。；.;]{{0,6}}?(?:是|为)([\u4e00-\u9fff]{{2,4}}?)(?=[，。,.（(、]|$)"
        found += [(m.start(1), m.end(1), m.group(1), "") for m in re.finditer(named, text, re.I)]
    return found


def find_person(results: list[dict[str, Any]], exclude: str = "", role: str = "") -> Person | None:
    """The person a snippet names for a role (CEO, founder…): nearest that role word, not a predecessor."""
    excluded = {w.lower() for w in re.findall(r"[A-Za-z]+", exclude)} | set(re.findall(r"\S+·\S+", exclude))
    role_words = ROLES.get(role, ROLE_WORDS)
    for hit in results:
        text = _text(hit)
        scored = []
        for start, end, name, alt in _candidates(text, excluded, role_words):
            gap = _distance(start, end, text, role_words)
            before = text[max(0, start - 12):start]
            penalty = 100 if re.search(_PREDECESSOR, before, re.I) else 0
            scored.append(((gap if gap is not None else 60) + penalty, start, name, alt))
        if scored:
            _, _, name, alt = min(scored)
            return Person(name, alt, str(hit.get("source", "")), text)
    return None


def _transliteration(name: str) -> str:
    """A transliterated name without a function word glued to its front (是蒂姆·库克 -> 蒂姆·库克)."""
    first, _, rest = name.partition("·")
    while len(first) > 2 and first[0] in "是为由和与的及任被即乃从":
        first = first[1:]
    return f"{first}·{rest}"


def _adjacent_cjk_name(text: str, start: int, end: int) -> str:
    """A transliterated name written right before "(Tim Cook)" or right after "Tim Cook (", if any."""
    before = re.search(r"([\u4e00-\u9fff]{1,5}·[\u4e00-\u9fff]{1,6})\s*[（(]\s*$", text[:start])
    if before:
        return _transliteration(before.group(1))
    after = re.match(r"\s*[（(]\s*([\u4e00-\u9fff]{1,5}·[\u4e00-\u9fff]{1,6})", text[end:])
    return _transliteration(after.group(1)) if after else ""


def snippet_temperature(text: str) -> float | None:
    """A temperature in °C mentioned in free text (a weather search snippet)."""
    match = re.search(r"(-?\d+(?:\.\d+)?)\s*(?:°C|℃|摄氏度|度|degrees? C(?:elsius)?)", text or "", re.I)
    return float(match.group(1)) if match else None


def current_date(data: Any) -> tuple[int | None, int | None, int | None]:
    """(year, month, day) of a get_time result, from its "date"/"iso" fields (or just "year")."""
    if not isinstance(data, dict):
        return None, None, None
    for key in ("date", "iso"):
        match = re.match(r"\s*(\d{4})-(\d{1,2})-(\d{1,2})", str(data.get(key) or ""))
        if match:
            return int(match.group(1)), int(match.group(2)), int(match.group(3))
    year = data.get("year")
    return (int(str(year)) if str(year or "").isdigit() else None), None, None

"""Vocabulary of the scripted offline model: the city gazetteer and entity aliases (from its data files) and
language helpers."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from reactgraph.tools.builtin.calculator_notation import superscripts_as_powers

from .vocabulary import city_rows, word_list

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

"""The places a question asks about: the cues of weather and time clauses, the places they name, and what a
clause that names none ("…and what time is it there?", "那里天气如何？") refers back to.

A place is a gazetteer city, or a name the gazetteer lacks that reads as one (a short run of Chinese characters, one
to three capitalised words, a city qualified by its region as in "Paris, Texas"). A name the gazetteer lacks is kept
as the user wrote it, so that the tool is asked about that place and its answer is checked against it: the model
never answers one place with another's data (`same_place`), and a clause that refers back to a place no earlier
clause or question named is not answered with the local time or another city's weather but reported missing.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from .words import find_cities, has_cjk, lookup_city

WEATHER = re.compile(r"天气|气温|温度|多少度|几度|下雨|下雪|冷不冷|热不热|晴|阴天|\bweather\b|\btemperatures?\b|"
                     r"\bforecast\b|\braining\b|\bsnowing\b|\bhumid(?:ity)?\b", re.I)
COMPARE = re.compile(r"哪(?:个|座|一个|一座|里|边)?[^?？]{0,8}?(?:热|暖|冷|凉|温度高|温度低)|"
                     r"更热|更冷|更暖|更凉|最热|最冷|[和跟与同][^?？]{1,12}?比|比[^?？]{1,12}?(?:热|冷|暖|凉|低|高)|"
                     r"比较|对比|温差|相比|\b(?:hotter|warmer|colder|cooler|hottest|warmest|coldest|coolest|"
                     r"compare|comparison|versus|vs)\b|\bwhich\b[^?]*\b(?:hot|warm|cold|cool)", re.I)
# Weather on another day than today: the weather tool knows current conditions only, so such a clause is a part
# no tool answers (named missing), never answered with today's weather.
OTHER_DAY = re.compile(r"明天|后天|昨天|前天|下周|上周|下个?月|上个?月|明年|去年|周末|(?:19|20)\d{2}\s*年|"
                       r"\d{1,2}\s*月\s*\d{1,2}\s*[日号]|"
                       r"\b(?:tomorrow|yesterday|forecast|weekend)\b|\b(?:next|last) (?:week|month|year|"
                       r"monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b|\b(?:19|20)\d{2}\b|"
                       r"\bwill (?:it|the weather|the temperature)\b|\bwas (?:it|the weather)\b", re.I)
TIME = re.compile(r"几点|几时|什么时间|现在时间|当前时间|时间是|几号|星期几|周几|礼拜几|日期|今天是|\bwhat time\b|"
                  r"\btime is it\b|\bcurrent time\b|\blocal time\b|\btime (?:now |right now )?in\b|"
                  r"\bwhat(?:'s| is) the (?:date|time)\b|\bwhat day\b|\btoday's date\b|\bdate today\b|"
                  r"\bcurrent date\b|\bthe time\b", re.I)
QUESTION = re.compile(r"什么|谁|哪|介绍|讲讲|说说|解释|多少|怎么样|如何|吗|呢|为什么|了解|是否|\?|"
                      r"^(?:what|who|which|when|where|why|how|tell me|explain|describe|define|give me|"
                      r"do you know|is|are|does|did|can)\b", re.I)

_PLACE_FILLER = re.compile(r"^(?:请问|请|帮我|查一下|查询|查查|告诉我|看看|想知道|你知道|今天|明天|现在|目前|当前|"
                           r"这几天|最近)+|(?:的|今天|明天|现在|目前|当前|这几天|最近|分别|(?<![首成京古])都|市)+$")
_SPLIT = re.compile(r"\s*(?:和|与|跟|及|以及|、|,|/|&|\band\b|\bor\b|\bvs\.?|\bversus\b)\s*", re.I)
_REFERS_BACK = re.compile(r"^(?:那里|那儿|那边|那个城市|那座城市|当地|该地|该市|there|that city|that place)$", re.I)
# Words that point back at a place named before; "这里" / "here" are the user's own place (local time).
REFERENCE = re.compile(r"那里|那儿|那边|那个城市|那座城市|当地|该地|该市|\bthere\b|\bthat (?:city|place|town)\b", re.I)
# A place described by another part's result ("the colder one", "较冷的那个"): the script cannot work it out.
_DESCRIBED = re.compile(r"\bthe (?:colder|warmer|hotter|cooler|other|first|second|last) (?:one|city|place)\b|"
                        r"(?:更|较|最)?(?:冷|热|暖|凉)的(?:那个|那座|城市)|另一个城市", re.I)
_HERE = re.compile(r"^(?:我这里|我这儿|我们这里|这里|这儿|本地|我这边)$")
# "Paris, Texas": a city and the region it lies in, with no other list around it, is one place.
_QUALIFIED = re.compile(r"^(?P<city>[^,]+?),\s*(?P<region>[A-Z][A-Za-z.'-]*(?: [A-Z][A-Za-z.'-]*)?)$")
_LIST_WORDS = re.compile(r"\band\b|\bor\b|&|\bvs\b|\bversus\b|/", re.I)
_FOLLOW_ZH = re.compile(r"^(?:那|那么|那在)?(?P<place>[\u4e00-\u9fff]{2,8}?)(?:的呢|呢)$")
_FOLLOW_EN = re.compile(r"^(?i:and|what about|how about)\s+(?i:in\s+|for\s+|at\s+)?(?P<place>[A-Z][A-Za-z.'-]*"
                        r"(?: [A-Z][A-Za-z.'-]*){0,2})$")
# Short Chinese words that are not places, though they read like a name before 呢 or a time cue.
_NOT_PLACE = re.compile(r"^(?:你好|您好|哈喽|那个|这个|那么|我们|你们|大家|他们|它们|今天|明天|后天|昨天|现在|今年|"
                        r"刚才)$")


def reads_as_a_place(piece: str, zh: bool) -> bool:
    """A name the gazetteer lacks but that reads as one: a short run of Chinese characters that is not a
    question word, or one to three capitalised words."""
    if zh:
        return (2 <= len(piece) <= 8 and bool(re.fullmatch(r"[\u4e00-\u9fff]+", piece)) and not QUESTION.search(piece)
                and not _NOT_PLACE.match(piece))
    return bool(re.fullmatch(r"[A-Z][A-Za-z.'-]*(?: [A-Z][A-Za-z.'-]*){0,2}", piece))


def _qualified(span: str) -> str | None:
    """"Paris, Texas" when the span is one city and its region (not a list of places), else None."""
    match = _QUALIFIED.match(span.strip(" ?.!"))
    if not match or _LIST_WORDS.search(span) or find_cities(match.group("region")):
        return None
    city = re.sub(r"^(?:(?:the|in|for|at|of|on)\s+)+", "", match.group("city"), flags=re.I).strip()
    return f"{city}, {match.group('region')}" if find_cities(city) else None


def weather_cities(clause: str) -> list[str]:
    """City names (gazetteer names in the question's script, or the user's own words) a weather clause names."""
    zh = has_cjk(clause)
    names: list[str] = []
    if zh:
        cut = min((m.start() for m in (WEATHER.search(clause), COMPARE.search(clause)) if m), default=len(clause))
        span = clause[:cut]
    else:
        match = re.search(r"\b(?:in|for|at|of|on|between)\s+(.+?)(?=\?|$|[.!]|\b(?:today|tomorrow|now|right now|"
                          r"currently|this week|which|is|are|and which)\b)", clause, re.I)
        span = match.group(1) if match else ""
        if qualified := _qualified(span):
            return [qualified]
    for piece in _SPLIT.split(span):
        piece = _PLACE_FILLER.sub("", piece.strip(" ,.?!")).strip()
        piece = re.sub(r"^(?:(?:the|both|in|for|at|of|on)\s+)+", "", piece, flags=re.I).strip()  # "… and in Gotham"
        if not piece or _REFERS_BACK.match(piece):  # "那里天气如何？": the place named before, not a place "那里"
            continue
        hits = find_cities(piece)
        if hits:
            names.extend(city.name("zh" if zh else "en") for _, _, city in hits)
        elif reads_as_a_place(piece, zh):
            names.append(piece)
    if not names or (zh and COMPARE.search(clause)):
        # "北京的气温比上海低多少度": the city after 比 is a part of the question too.
        names += [city.name("zh" if zh else "en") for _, _, city in find_cities(clause)]
    return list(dict.fromkeys(names))


def time_places(clause: str) -> list[tuple[str, str]]:
    """(display name, timezone argument) for each place a time clause names; [] means none is named. A place the
    gazetteer lacks is its own timezone argument: the clock tool says whether it knows it."""
    zh = has_cjk(clause)
    if not zh:
        match = re.search(r"\b(?:time|date)\b[^?]*?\bin\s+(.+?)(?=\?|$|[.!]|\b(?:now|right now|today)\b)", clause)
        if match and (qualified := _qualified(match.group(1))):
            return [(qualified, qualified)]
    places = [(city.name("zh" if zh else "en"), city.tz) for _, _, city in find_cities(clause)]
    if places:
        return list(dict.fromkeys(places))
    if zh:
        cue = TIME.search(clause)
        piece = _PLACE_FILLER.sub("", clause[:cue.start()] if cue else "").strip(" ,，")
        if piece and not _HERE.match(piece) and not _REFERS_BACK.match(piece) and reads_as_a_place(piece, zh):
            return [(piece, piece)]  # "雷克雅未克现在几点？": that place's time, not the local one
        return []
    match = re.search(r"\b(?:time|date)\b[^?]*?\bin\s+([A-Z][A-Za-z/_'-]*(?: [A-Z][A-Za-z_'-]*){0,2})", clause)
    return [(match.group(1), match.group(1))] if match else []


def refers_back(clause: str) -> bool:
    """The clause points at a place named before ("there", "那里") instead of naming one."""
    return bool(REFERENCE.search(clause)) and not find_cities(clause)


def described_place(clause: str) -> bool:
    """The clause names its place by what another part finds ("…in the colder one"), not by name."""
    return bool(_DESCRIBED.search(clause)) and not find_cities(clause)


def follow_up_place(clause: str) -> str | None:
    """The place of a follow-up such as "那雷克雅未克呢？" / "And in Reykjavik?" that the gazetteer lacks."""
    text = clause.strip(" ?？!！。.")
    match = _FOLLOW_ZH.match(text) if has_cjk(text) else _FOLLOW_EN.match(text)
    if not match:
        return None
    place = match.group("place")
    return place if reads_as_a_place(place, has_cjk(place)) and not _REFERS_BACK.match(place) else None


def places_named(texts: Sequence[str], lang: str) -> list[tuple[str, str]]:
    """(name, timezone argument) of the places the texts name, in order: gazetteer cities, then the names
    weather and time clauses give that the gazetteer lacks (their own timezone argument)."""
    found: list[tuple[str, str]] = []
    for text in texts:
        found += [(city.name(lang), city.tz) for _, _, city in find_cities(text)]
        if WEATHER.search(text):
            found += [(name, name) for name in weather_cities(text) if lookup_city(name) is None]
        if TIME.search(text):
            found += [place for place in time_places(text) if lookup_city(place[0]) is None]
    return list(dict.fromkeys(found))


def _key(name: str) -> str:
    text = unicodedata.normalize("NFKC", name).casefold().strip()
    text = re.sub(r"(?:市|\s+city)$", "", text)
    return "".join(char for char in text if char.isalnum() or char == ",")


def same_place(asked: str, answered: object) -> bool:
    """Whether a tool's answer about `answered` is about the place asked for: the same gazetteer city, the same
    name, or a more precise one ("Paris, FR" for "Paris"); never a less precise one ("Paris" for "Paris, Texas").
    An answer that names no place has nothing to contradict."""
    if not isinstance(answered, str) or not answered.strip() or not asked:
        return True
    city_asked, city_answered = lookup_city(asked), lookup_city(answered)
    if city_asked is not None and city_answered is not None:
        return city_asked == city_answered
    ask, got = _key(asked), _key(answered)
    return got == ask or got.startswith(f"{ask},")

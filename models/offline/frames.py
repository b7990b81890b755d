"""Clause-level cues: which built-in task a clause asks for, and the slots it fills (cities, query, expression)."""

from __future__ import annotations

import re

from .arith import find_expression
from .lexicon import (
    ENTITY_ALIASES,
    KEYWORDS_EN,
    PRONOUNS,
    english_entity,
    find_cities,
    has_cjk,
    latin_terms,
    lookup_city,
)
from .vocabulary import word_list

WEATHER = re.compile(r"天气|气温|温度|多少度|几度|下雨|下雪|冷不冷|热不热|晴|阴天|\bweather\b|\btemperatures?\b|"
                     r"\bforecast\b|\braining\b|\bsnowing\b|\bhumid(?:ity)?\b", re.I)
COMPARE = re.compile(r"哪(?:个|座|一个|一座|里|边)?[^?？]{0,8}?(?:热|暖|冷|凉|温度高|温度低)|"
                     r"更热|更冷|更暖|更凉|最热|最冷|[和跟与同][^?？]{1,12}?比|比[^?？]{1,12}?(?:热|冷|暖|凉|低|高)|"
                     r"比较|对比|温差|相比|\b(?:hotter|warmer|colder|cooler|hottest|warmest|coldest|coolest|"
                     r"compare|comparison|versus|vs)\b|\bwhich\b[^?]*\b(?:hot|warm|cold|cool)", re.I)
COLD = re.compile(r"冷|凉|温度低|气温低|更低|\b(?:colder|cooler|coldest|coolest|lower)\b", re.I)
TIME = re.compile(r"几点|几时|什么时间|现在时间|当前时间|时间是|几号|星期几|周几|礼拜几|日期|今天是|\bwhat time\b|"
                  r"\btime is it\b|\bcurrent time\b|\blocal time\b|\btime (?:now |right now )?in\b|"
                  r"\bwhat(?:'s| is) the (?:date|time)\b|\bwhat day\b|\btoday's date\b|\bdate today\b|"
                  r"\bcurrent date\b|\bthe time\b", re.I)
CALC_INTENT = re.compile(r"计算|算一下|算算|等于|多少|几|结果|求|\b(?:calculate|compute|evaluate|what is|what's|"
                         r"how much|equals?|result|solve)\b|=", re.I)
CREATIVE = re.compile(r"^(?:请|帮我|给我|能不能|可以|你能)?\s*(?:写|作|编|创作|画|唱|翻译)(?:一|个|首|篇|段|幅|下|几)|"
                      r"笑话|一首诗|写诗|作诗|写一首|讲个故事|\b(?:tell|write|compose|make up|sing|draw|"
                      r"translate)\b.{0,20}\b(?:jokes?|poems?|story|stories|songs?|haiku|essay|letter)\b|"
                      r"^(?:write|compose|translate|draw|sing)\b", re.I)
QUESTION = re.compile(r"什么|谁|哪|介绍|讲讲|说说|解释|多少|怎么样|如何|吗|呢|为什么|了解|是否|\?|"
                      r"^(?:what|who|which|when|where|why|how|tell me|explain|describe|define|give me|"
                      r"do you know|is|are|does|did|can)\b", re.I)
# "谁创造了 Python" / "who founded NVIDIA" want a name; "谁是 Elon Musk" / "who is Linus" want a description.
WHO_DID = re.compile(r"谁(?!是)[^?？]{0,3}?(?:创|发明|开发|写|设计|建|成立|提出|发现|领导|执掌|经营|拥有)|"
                     r"\bwho\s+(?!is\b|are\b|was\b|were\b)[a-z]+", re.I)
SMALL_TALK = re.compile(r"^(?:你好|您好|嗨|哈喽|谢谢|多谢|再见|hi|hello|hey|thanks|thank you|bye|ok|好的)\W*$", re.I)

_ZH_FILLER: tuple[str, ...] = tuple(word_list("fillers_zh"))  # longest first where one contains another
_EN_STOP = frozenset(word_list("stop_words_en"))
_PLACE_FILLER = re.compile(r"^(?:请问|请|帮我|查一下|查询|查查|告诉我|看看|想知道|你知道|今天|明天|现在|目前|当前|"
                           r"这几天|最近)+|(?:的|今天|明天|现在|目前|当前|这几天|最近|分别|都|市)+$")
_SPLIT = re.compile(r"\s*(?:和|与|跟|及|以及|、|,|/|&|\band\b|\bor\b|\bvs\.?|\bversus\b)\s*", re.I)


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
    for piece in _SPLIT.split(span):
        piece = _PLACE_FILLER.sub("", piece.strip(" ,.?!")).strip()
        piece = re.sub(r"^(?:the|both)\s+", "", piece, flags=re.I).strip()
        if not piece:
            continue
        hits = find_cities(piece)
        if hits:
            names.extend(city.name("zh" if zh else "en") for _, _, city in hits)
        elif _reads_as_a_place(piece, zh):
            names.append(piece)
    if not names or (zh and COMPARE.search(clause)):
        # "北京的气温比上海低多少度": the city after 比 is a part of the question too.
        names += [city.name("zh" if zh else "en") for _, _, city in find_cities(clause)]
    return list(dict.fromkeys(names))


def _reads_as_a_place(piece: str, zh: bool) -> bool:
    """A name the gazetteer lacks but that reads as one: a short run of Chinese characters that is not a
    question word, or one to three capitalised words."""
    if zh:
        return 2 <= len(piece) <= 8 and bool(re.fullmatch(r"[\u4e00-\u9fff]+", piece)) and not QUESTION.search(piece)
    return bool(re.fullmatch(r"[A-Z][A-Za-z.'-]*(?: [A-Z][A-Za-z.'-]*){0,2}", piece))


def time_places(clause: str) -> list[tuple[str, str]]:
    """(display name, timezone argument) for each place a time clause names; [] means local time."""
    zh = has_cjk(clause)
    places = [(city.name("zh" if zh else "en"), city.tz) for _, _, city in find_cities(clause)]
    if not places and not zh:
        match = re.search(r"\b(?:time|date)\b[^?]*?\bin\s+([A-Z][A-Za-z/_'-]*(?: [A-Z][A-Za-z_'-]*){0,2})", clause)
        if match:
            places.append((match.group(1), match.group(1)))
    return list(dict.fromkeys(places))


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

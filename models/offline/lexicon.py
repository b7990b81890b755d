"""Vocabulary of the scripted offline model: a city gazetteer, entity aliases and language helpers."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from reactgraph.tools.builtin.calculator_notation import superscripts_as_powers

# "中文名|English name|IANA time zone|extra aliases..." — ~100 Chinese and world cities.
_CITY_ROWS = """
北京|Beijing|Asia/Shanghai|Peking|北京市
上海|Shanghai|Asia/Shanghai|上海市
广州|Guangzhou|Asia/Shanghai|Canton
深圳|Shenzhen|Asia/Shanghai
天津|Tianjin|Asia/Shanghai
重庆|Chongqing|Asia/Shanghai
成都|Chengdu|Asia/Shanghai
杭州|Hangzhou|Asia/Shanghai
南京|Nanjing|Asia/Shanghai
武汉|Wuhan|Asia/Shanghai
西安|Xi'an|Asia/Shanghai|Xian
苏州|Suzhou|Asia/Shanghai
长沙|Changsha|Asia/Shanghai
郑州|Zhengzhou|Asia/Shanghai
沈阳|Shenyang|Asia/Shanghai
青岛|Qingdao|Asia/Shanghai
大连|Dalian|Asia/Shanghai
厦门|Xiamen|Asia/Shanghai
宁波|Ningbo|Asia/Shanghai
济南|Jinan|Asia/Shanghai
哈尔滨|Harbin|Asia/Shanghai
长春|Changchun|Asia/Shanghai
福州|Fuzhou|Asia/Shanghai
昆明|Kunming|Asia/Shanghai
贵阳|Guiyang|Asia/Shanghai
南宁|Nanning|Asia/Shanghai
南昌|Nanchang|Asia/Shanghai
合肥|Hefei|Asia/Shanghai
石家庄|Shijiazhuang|Asia/Shanghai
太原|Taiyuan|Asia/Shanghai
兰州|Lanzhou|Asia/Shanghai
西宁|Xining|Asia/Shanghai
银川|Yinchuan|Asia/Shanghai
乌鲁木齐|Urumqi|Asia/Shanghai
拉萨|Lhasa|Asia/Shanghai
呼和浩特|Hohhot|Asia/Shanghai
海口|Haikou|Asia/Shanghai
三亚|Sanya|Asia/Shanghai
珠海|Zhuhai|Asia/Shanghai
东莞|Dongguan|Asia/Shanghai
佛山|Foshan|Asia/Shanghai
无锡|Wuxi|Asia/Shanghai
温州|Wenzhou|Asia/Shanghai
香港|Hong Kong|Asia/Hong_Kong
澳门|Macau|Asia/Macau|Macao
台北|Taipei|Asia/Taipei
东京|Tokyo|Asia/Tokyo
大阪|Osaka|Asia/Tokyo
首尔|Seoul|Asia/Seoul
新加坡|Singapore|Asia/Singapore
曼谷|Bangkok|Asia/Bangkok
吉隆坡|Kuala Lumpur|Asia/Kuala_Lumpur
雅加达|Jakarta|Asia/Jakarta
马尼拉|Manila|Asia/Manila
河内|Hanoi|Asia/Bangkok
新德里|New Delhi|Asia/Kolkata|Delhi|德里
孟买|Mumbai|Asia/Kolkata
迪拜|Dubai|Asia/Dubai
伊斯坦布尔|Istanbul|Europe/Istanbul
莫斯科|Moscow|Europe/Moscow
伦敦|London|Europe/London
巴黎|Paris|Europe/Paris
柏林|Berlin|Europe/Berlin
罗马|Rome|Europe/Rome
马德里|Madrid|Europe/Madrid
巴塞罗那|Barcelona|Europe/Madrid
阿姆斯特丹|Amsterdam|Europe/Amsterdam
布鲁塞尔|Brussels|Europe/Brussels
维也纳|Vienna|Europe/Vienna
苏黎世|Zurich|Europe/Zurich
日内瓦|Geneva|Europe/Zurich
斯德哥尔摩|Stockholm|Europe/Stockholm
奥斯陆|Oslo|Europe/Oslo
哥本哈根|Copenhagen|Europe/Copenhagen
赫尔辛基|Helsinki|Europe/Helsinki
华沙|Warsaw|Europe/Warsaw
布拉格|Prague|Europe/Prague
雅典|Athens|Europe/Athens
里斯本|Lisbon|Europe/Lisbon
都柏林|Dublin|Europe/Dublin
基辅|Kyiv|Europe/Kyiv|Kiev
开罗|Cairo|Africa/Cairo
约翰内斯堡|Johannesburg|Africa/Johannesburg
内罗毕|Nairobi|Africa/Nairobi
纽约|New York|America/New_York|NYC|New York City
洛杉矶|Los Angeles|America/Los_Angeles
旧金山|San Francisco|America/Los_Angeles|三藩市
芝加哥|Chicago|America/Chicago
西雅图|Seattle|America/Los_Angeles
波士顿|Boston|America/New_York
华盛顿|Washington|America/New_York|Washington DC
迈阿密|Miami|America/New_York
拉斯维加斯|Las Vegas|America/Los_Angeles
休斯顿|Houston|America/Chicago
多伦多|Toronto|America/Toronto
温哥华|Vancouver|America/Vancouver
蒙特利尔|Montreal|America/Toronto
墨西哥城|Mexico City|America/Mexico_City
圣保罗|São Paulo|America/Sao_Paulo|Sao Paulo
里约热内卢|Rio de Janeiro|America/Sao_Paulo|Rio
布宜诺斯艾利斯|Buenos Aires|America/Argentina/Buenos_Aires
利马|Lima|America/Lima
悉尼|Sydney|Australia/Sydney
墨尔本|Melbourne|Australia/Melbourne
奥克兰|Auckland|Pacific/Auckland
檀香山|Honolulu|Pacific/Honolulu
德黑兰|Tehran|Asia/Tehran
利雅得|Riyadh|Asia/Riyadh
特拉维夫|Tel Aviv|Asia/Jerusalem
卡拉奇|Karachi|Asia/Karachi
达卡|Dhaka|Asia/Dhaka
"""

# Organisations, people and products as users write them -> the English key word a search index knows.
ENTITY_ALIASES: dict[str, str] = {
    "苹果公司": "Apple", "苹果": "Apple", "英伟达": "NVIDIA", "辉达": "NVIDIA", "特斯拉": "Tesla",
    "微软": "Microsoft", "谷歌": "Google", "亚马逊": "Amazon", "阿里巴巴": "Alibaba", "腾讯": "Tencent",
    "百度": "Baidu", "字节跳动": "ByteDance", "华为": "Huawei", "小米": "Xiaomi", "脸书": "Facebook",
    "星舰": "Starship", "深度求索": "DeepSeek", "马斯克": "Elon Musk", "埃隆·马斯克": "Elon Musk",
    "库克": "Tim Cook", "蒂姆·库克": "Tim Cook", "黄仁勋": "Jensen Huang", "乔布斯": "Steve Jobs",
    "比尔·盖茨": "Bill Gates", "盖茨": "Bill Gates", "林纳斯": "Linus Torvalds", "托瓦兹": "Linus Torvalds",
    "吉多": "Guido van Rossum", "龟叔": "Guido van Rossum", "扎克伯格": "Mark Zuckerberg",
    "纳德拉": "Satya Nadella", "皮查伊": "Sundar Pichai", "奥特曼": "Sam Altman",
}

# Chinese relation words -> English key words, for rephrasing a search in English.
KEYWORDS_EN: dict[str, str] = {
    "首席执行官": "CEO", "现任": "current", "创始人": "founder", "创办人": "founder", "董事长": "chairman",
    "总裁": "president", "创造": "creator", "创建": "creator", "发明": "inventor", "开发": "developer",
    "诞生": "released", "发布": "released", "问世": "released", "推出": "launched", "成立": "founded",
    "创立": "founded", "出生": "born", "生日": "born", "市值": "market value", "天气": "weather",
    "气温": "temperature", "年龄": "age", "历史": "history", "特点": "features", "作者": "author",
}

PRONOUNS = {"它", "他", "她", "它们", "他们", "其", "it", "he", "she", "they", "its", "his", "her", "that", "this"}

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
    rows = []
    for line in _CITY_ROWS.strip().splitlines():
        zh, en, tz, *extra = line.split("|")
        rows.append(City(zh, en, tz, (zh, en, *extra)))
    return tuple(rows)


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

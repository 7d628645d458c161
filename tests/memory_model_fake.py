"""A deterministic stand-in for the memory model's descriptions (keywords and questions in
both languages, ``memory.describe``), for the tests and the "with a memory model" curve of
``bench/retrieval_quality.py``.

It treats every memory alike, near-miss distractors included: the dictionary translations of
the memory's own words both ways (``text.lexicon``), the other script of the names it knows,
and for each everyday topic the memory touches (a trigger word in its text) that topic's
broader words and one question in each language. That is what a small real model writes at
the least ("用户喜欢听爵士乐": 爵士乐, jazz, 音乐, music; "我喜欢什么音乐？"); the topics are
hand-written, so what it cannot name (a topic missing here) it leaves out, as a weak model
would.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pawwake.memory.model_terms import MAX_KEYWORDS, ModelTerms
from pawwake.text import lexicon, tokens
from pawwake.text.language import language_of
from tests.fake_upstream import Reply, completion_body

# (triggers found in the text, lower-cased), keywords, (Chinese question, English question)
TOPICS: tuple[tuple[tuple[str, ...], tuple[str, ...], tuple[str, str]], ...] = (
    (("狗", "柯基", "金毛", "dog", "corgi", "retriever", "puppy"),
     ("狗", "dog", "宠物", "pet", "品种", "breed"), ("我的狗是什么品种？", "What breed is my dog?")),
    (("猫", "cat", "kitten"), ("猫", "cat", "宠物", "pet"), ("我的猫怎么样？", "How is my cat?")),
    (("音乐", "爵士", "摇滚", "歌", "jazz", "music", "song", "lo-fi", "乐团", "orchestra", "band"),
     ("音乐", "music", "爱好", "hobby"), ("我喜欢什么音乐？", "What music do I like?")),
    (("大提琴", "小提琴", "钢琴", "吉他", "乐器", "cello", "violin", "piano", "guitar", "instrument"),
     ("乐器", "instrument", "音乐", "music"), ("我演奏什么乐器？", "What instrument do I play?")),
    (("跑步", "健身", "游泳", "瑜伽", "马拉松", "锻炼", "run", "jog", "gym", "swim", "yoga",
      "marathon", "exercise", "workout"),
     ("运动", "锻炼", "健身", "跑步", "exercise", "sport", "workout", "running"),
     ("我平时做什么运动？", "What exercise do I do?")),
    (("过敏", "allerg"), ("过敏", "allergy", "健康", "health", "忌口"),
     ("我对什么过敏，哪些不能吃？", "What am I allergic to, what can't I eat?")),
    (("素", "vegetarian", "vegan"), ("素食", "吃素", "肉", "vegetarian", "meat"),
     ("我吃肉吗？", "Do I eat meat?")),
    (("吃", "素", "菜", "eat", "vegetarian", "vegan", "cilantro", "coriander", "food", "meat"),
     ("饮食", "diet", "食物", "food", "忌口"), ("我有什么忌口？", "What do I not eat?")),
    (("糖尿病", "病", "青霉素", "医生", "药", "diabetes", "penicillin", "doctor", "medicine"),
     ("健康", "health", "疾病", "illness", "医疗", "medical"),
     ("我有什么健康问题？", "What health conditions do I have?")),
    (("妹妹", "姐姐", "哥哥", "弟弟", "奶奶", "爷爷", "外婆", "妈妈", "爸爸", "儿子", "女儿", "老婆",
      "妻子", "丈夫", "女朋友", "男朋友", "sister", "brother", "grandma", "grandmother",
      "mother", "father", "son ", "daughter", "wife", "husband", "girlfriend", "boyfriend"),
     ("家人", "family", "亲人", "relative"), ("我的家人怎么样？", "How is my family?")),
    (("妹妹", "姐姐", "sister"), ("妹妹", "姐姐", "sister", "sibling"),
     ("我妹妹怎么样？", "How is my sister?")),
    (("奶奶", "外婆", "grandma", "grandmother"), ("奶奶", "外婆", "grandma", "grandmother"),
     ("我奶奶怎么样？", "How is my grandma?")),
    (("老婆", "妻子", "wife"), ("妻子", "老婆", "太太", "wife", "spouse"),
     ("我老婆怎么样？", "How is my wife?")),
    (("女朋友", "女友", "girlfriend"), ("女朋友", "女友", "girlfriend", "partner"),
     ("我女朋友怎么样？", "How is my girlfriend?")),
    (("儿子", "son ", "son's"), ("儿子", "孩子", "son", "child", "kid"),
     ("我儿子怎么样？", "How is my son?")),
    (("工作", "公司", "上班", "开发", "老师", "教师", "护士", "工程师", "job", "work", "company",
      "teacher", "nurse", "engineer", "developer", "studio"),
     ("工作", "职业", "job", "work", "career", "occupation"),
     ("我是做什么工作的？", "What do I do for a living?")),
    (("出差", "旅游", "旅行", "trip", "travel", "flying to"),
     ("旅行", "出行", "出差", "travel", "trip"), ("我要去哪里出差？", "Where am I travelling to?")),
    (("怕", "afraid", "fear", "scared"), ("害怕", "恐惧", "fear", "afraid", "phobia"),
     ("我害怕什么？", "What am I afraid of?")),
    (("飞机", "flying", "flight", "plane"), ("飞机", "坐飞机", "flying", "plane", "flight"),
     ("我坐飞机吗？", "Do I fly?")),
    (("火车", "地铁", "公交", "高铁", "train ", "train to", "subway", "bus ", "commute"),
     ("通勤", "交通", "火车", "commute", "transport", "train"),
     ("我怎么去上班？", "How do I get to work?")),
    (("车", "比亚迪", "特斯拉", " car", "vehicle", "scooter"), ("车", "汽车", "car", "vehicle"),
     ("我开什么车？", "What car do I drive?")),
    (("学", "考试", "考过", "考n", "日语", "learn", "study", "exam", "test", "japanese"),
     ("学习", "考试", "study", "exam", "learning"), ("我在学什么？", "What am I studying?")),
    (("生日", "birthday", "born"), ("生日", "birthday", "日期", "date"),
     ("我的生日是哪天？", "When is my birthday?")),
    (("岁", "年纪", "years old", " age"), ("年龄", "年纪", "age", "old"),
     ("他多大了？", "How old are they?")),
    (("住", "搬", "live", "moved", "move to"), ("住", "居住", "城市", "home", "live", "city"),
     ("我住在哪里？", "Where do I live?")),
)
# Names and places in the other script, as a model would write them.
NAMES = (("豆豆", "Doudou"), ("林晓", "Lin Xiao"), ("莎拉", "Sarah"), ("露娜", "Luna"),
         ("里奥", "Leo"), ("杭州", "Hangzhou"), ("东京", "Tokyo"), ("多伦多", "Toronto"),
         ("柏林", "Berlin"), ("北京", "Beijing"), ("上海", "Shanghai"), ("日语", "Japanese"),
         ("大提琴", "cello"), ("比亚迪", "BYD"), ("七月", "July"), ("香菜", "cilantro"),
         ("青霉素", "penicillin"), ("糖尿病", "diabetes"), ("花生", "peanut"))


def describe(content: str) -> ModelTerms:
    """What the stand-in model writes for one memory."""
    text = content.lower() + " "
    keywords: list[str] = []
    for chinese, english in NAMES:
        if chinese in content or english.lower() in text:
            keywords += [chinese, english]
    questions: list[str] = []
    whose = _whose(content)
    for triggers, words, asked in TOPICS:
        if any(trigger in text for trigger in triggers):
            keywords += words
            # The topic's own subject ("用户的妹妹...": the sister topic) is asked as it is.
            named = whose is not None and not any(t in whose.lower() + " " for t in triggers)
            questions += [_asked_about(q, whose) for q in asked] if named else asked
    for word in tokens.index_terms(content):
        keywords += (lexicon.english_terms(word) if language_of(word) == "zh"
                     else lexicon.chinese_words(word)[:2])
    return ModelTerms.of({"keywords": list(dict.fromkeys(keywords))[:MAX_KEYWORDS],
                          "questions": questions})


# Who or what a memory "The user's X ..." / "用户的X..." is about: X, up to where its fact starts.
_WHOSE_EN = re.compile(r"^the user's (.+?) (?:is|has|was|are|just|bought|lives|drinks|collects"
                       r"|spends|opened|changed|takes|plays|moved)\b", re.IGNORECASE)
_WHOSE_ZH = re.compile(r"^用户的(.+?)(?:的|叫|住|是|在|下周|最近|买|养|周末|上个月|每天|喜欢|刚|对|今年)")


def _whose(content: str) -> str | None:
    """X of "The user's X ..." / "用户的X...", as written (None: the memory is the user's)."""
    match = _WHOSE_EN.match(content) or _WHOSE_ZH.match(content)
    return match.group(1) if match else None


def _in_language(words: str, language: str) -> str:
    """``words`` with each word the dictionary knows in ``language`` (names stay as written)."""
    if language_of(words) == language:
        return words
    if language == "en":
        return " ".join((lexicon.english_terms(w) or [w])[0] for w in tokens.index_terms(words)
                        if len(w) > 1) or words
    return "".join(w if w[:1].isupper() else (lexicon.chinese_words(w) or [w])[0]
                   for w in words.split())


def _asked_about(question: str, whose: str) -> str:
    """The topic's question asked about ``whose`` instead of the user."""
    whose = _in_language(whose, language_of(question))
    if language_of(question) == "zh":
        return (question.replace("我的", f"我{whose}的", 1) if "我的" in question
                else question.replace("我", f"我{whose}", 1))
    for mine, theirs in (("am I", f"is my {whose}"), ("do I", f"does my {whose}"),
                         ("Do I", f"Does my {whose}")):
        question = question.replace(mine, theirs)
    if whose not in question:
        question = re.sub(r"\bmy\b", f"my {whose}'s", question, count=1)
    return re.sub(r"\bI\b", f"my {whose}", question)


_NUMBERED = re.compile(r"^\d+\. (.*)$")


def describing_responder(body: dict[str, Any]) -> Reply:
    """A fake upstream's answer to the describe job's request (see ``memory.describe``);
    anything else gets the fake's ordinary text."""
    messages = body.get("messages") or []
    if not messages or "find its long-term memories" not in str(messages[0].get("content")):
        text = "你好，我是测试模型。Hello from the fake model."
        return Reply(body=completion_body(text))
    lines = [match.group(1) for line in str(messages[-1]["content"]).splitlines()
             if (match := _NUMBERED.match(line))]
    answer = [{"keywords": made.keywords, "questions": made.questions}
              for made in map(describe, lines)]
    return Reply(body=completion_body(json.dumps(answer, ensure_ascii=False)))

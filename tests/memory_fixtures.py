"""A fixed set of Chinese and English memories and a small SQL helper to insert them."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from typing import Any

from pawwake.db.pool import cursor
from pawwake.text import tokens

# (key, content, importance, event_date or None). Keys let tests name rows without ids.
MEMORIES: tuple[tuple[str, str, int, str | None], ...] = (
    ("spring_festival", "春节回老家陪爸妈吃年夜饭，大年初一去外婆家拜年", 7, "2026-02-17"),
    ("dental", "下周五下午三点去口腔医院做牙齿检查和洗牙", 6, None),
    ("cat", "我的猫叫小橘，是一只三岁的橘猫，特别爱吃冻干", 8, None),
    ("peanut", "The user is allergic to peanuts and carries an EpiPen", 9, None),
    ("coffee", "喜欢喝美式咖啡，不加糖也不加奶", 4, None),
    ("job", "在上海一家游戏公司做后端开发，主要写 Go 和 PostgreSQL", 6, None),
    ("kyoto", "Planning a trip to Kyoto in April to see the cherry blossoms", 5, "2026-04-05"),
    ("mom_birthday", "妈妈的生日是十月十二号，今年想送她一条羊绒围巾", 8, None),
    ("marathon", "Training for the Shanghai marathon, running 40 km a week", 6, None),
    ("guitar", "最近在学吉他，每天晚上练半小时指弹", 4, None),
    ("sister", "The user's younger sister Lily studies architecture in Melbourne", 6, None),
    ("insomnia", "最近经常失眠，凌晨两三点才睡得着", 6, None),
    ("vegetarian", "周一到周五吃素，周末偶尔吃鱼", 5, None),
    ("car", "The user drives a blue 2019 Honda Fit and hates parallel parking", 3, None),
    ("apartment", "租的房子在徐汇区，一室一户，月租六千五", 5, None),
    ("rust", "Learning Rust on weekends, currently reading the async chapter", 4, None),
    ("grandpa", "外公去年冬天住院做了心脏搭桥手术，现在恢复得不错", 7, None),
    ("piano_kid", "The user's nephew Tom has a piano recital on June 14", 5, "2026-06-14"),
    ("spicy", "不太能吃辣，火锅只点鸳鸯锅的清汤那边", 4, None),
    ("novel", "Writing a science fiction novel about a lighthouse keeper on Europa", 5, None),
    ("dog_fear", "小时候被狗咬过，到现在还有点怕大型犬", 5, None),
    ("tea", "The user prefers oolong tea in the afternoon and avoids caffeine after 5 pm", 3,
     None),
    ("wedding", "好朋友阿杰九月在杭州办婚礼，我是伴郎", 7, "2026-09-19"),
    ("glasses", "The user is short-sighted, about 600 degrees, and wears contact lenses", 4, None),
    ("stock", "去年买的基金亏了百分之二十，现在不太敢碰股票", 5, None),
    ("swim", "Goes swimming every Tuesday and Thursday morning before work", 4, None),
    ("photo", "周末喜欢带着富士相机去外滩扫街拍照", 4, None),
    ("allergy_season", "The user gets hay fever every spring and takes antihistamines", 5, None),
    ("cooking", "拿手菜是可乐鸡翅和番茄炒蛋", 3, None),
    ("boss", "The user's manager is called Karen and their weekly one-on-one is on Mondays", 5,
     None),
    ("moving", "计划明年搬到成都，那边离爸妈近一些", 6, None),
    ("laptop", "The user works on a 14-inch MacBook Pro and uses Neovim as the main editor", 3,
     None),
    ("exam", "在准备日语 N2 考试，七月初考试", 6, "2026-07-05"),
    ("anniversary", "The user's wedding anniversary with their wife Anna is on May 20", 8,
     "2026-05-20"),
    ("plants", "阳台上养了一盆龟背竹和几盆多肉", 3, None),
    ("backpain", "The user has lower back pain from sitting too long and sees a physiotherapist",
     6, None),
    ("bubble_tea", "每周至少喝两杯奶茶，最爱芋泥波波", 3, None),
    ("podcast", "Listens to history podcasts on the commute, especially about the Roman Empire", 3,
     None),
    ("dad_health", "爸爸有高血压，每天早上要吃降压药", 7, None),
    ("volunteer", "The user volunteers at an animal shelter one Saturday a month", 4, None),
    ("games", "最近在玩塞尔达传说，已经打了一百多个小时", 3, None),
    ("budget", "The user is saving for a down payment on a flat and budgets 3000 a month", 6,
     None),
    ("haircut", "习惯去公司楼下那家理发店，每个月剪一次头发", 2, None),
    ("bike", "Commutes by e-bike when it does not rain", 3, None),
    ("lactose", "乳糖不耐受，喝牛奶会肚子疼，平时喝燕麦奶", 6, None),
    ("chess", "The user plays online chess every night and is rated about 1500", 3, None),
    ("childhood", "小时候在武汉长大，最怀念热干面", 4, None),
    ("visa", "The user's work visa for Singapore expires at the end of November", 8,
     "2026-11-30"),
    ("gym", "办了一张健身卡，但是这个月只去了两次", 3, None),
    ("meditation", "Tries to meditate for ten minutes every morning using a breathing app", 3, None),
    ("kindle", "睡前喜欢用 Kindle 看推理小说，最喜欢东野圭吾", 4, None),
    ("flu_shot", "The user got a flu shot in October and had a sore arm for two days", 3, None),
    ("brother_baby", "哥哥嫂子下个月要生宝宝了，是个女孩", 7, None),
    ("noise", "The user is sensitive to noise and sleeps with earplugs", 4, None),
    ("driving_test", "驾照科目二挂了一次，下个月补考", 5, None),
    ("language", "The user speaks Mandarin, English and a little Cantonese", 4, None),
    ("hotpot", "和同事约好周五晚上去吃海底捞", 3, None),
    ("password_manager", "The user keeps every password in a password manager and uses 2FA", 3,
     None),
    ("knee", "去年打羽毛球扭伤了膝盖，现在爬楼梯还会疼", 6, None),
    ("cinema", "The user's favourite film is Spirited Away and they rewatch it every winter", 4,
     None),
    ("insurance", "给爸妈买了一份医疗保险，每年三月续费", 6, None),
    ("coding_bootcamp", "The user mentors two junior developers from a coding bootcamp", 4, None),
    ("snow", "从来没见过真正的大雪，很想去哈尔滨看冰雕", 4, None),
    ("recipe", "The user bakes sourdough bread every Sunday with a starter named Bubbles", 3,
     None),
)

KEYS = tuple(key for key, *_ in MEMORIES)

# Queries with no business in this collection (checked not to share keyword terms with it).
UNRELATED_QUERIES = (
    "量子色动力学的渐近自由",
    "How do I compile a Fortran kernel module",
)


async def insert_memory(pool: Any, content: str, *, importance: int = 5, layer: int = 1,
                        event_date: str | None = None, is_active: bool = True,
                        created_days_ago: float = 0.0) -> int:
    """Insert one memory the way the storage layer does (index terms included)."""
    async with cursor(pool) as cur:
        await cur.execute(
            "INSERT INTO memories (content, importance, layer, event_date, is_active,"
            " created_at, search_terms)"
            " VALUES (%s, %s, %s, %s, %s, now() - make_interval(secs => %s), %s) RETURNING id",
            (content, importance, layer,
             date.fromisoformat(event_date) if event_date else None, is_active,
             created_days_ago * 86400, tokens.index_terms(content)))
        row = await cur.fetchone()
        return row[0]


async def insert_fixture(pool: Any, keys: Iterable[str] | None = None) -> dict[str, int]:
    """Insert the fixture (or the named part of it); returns key -> id."""
    wanted = set(KEYS if keys is None else keys)
    ids: dict[str, int] = {}
    for number, (key, content, importance, event_date) in enumerate(MEMORIES):
        if key in wanted:
            ids[key] = await insert_memory(pool, content, importance=importance,
                                           event_date=event_date,
                                           created_days_ago=float(number % 30))
    return ids

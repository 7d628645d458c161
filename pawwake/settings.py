"""Every setting Pawwake knows, in one declarative table (the body of ``Settings``, typed by
each entry's kind), and how values are parsed."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar, cast, overload
from urllib.parse import urlsplit

GROUPS: tuple[str, ...] = ("basic", "memory", "partition", "vector", "recall", "advanced")
# The folder pawwake.py lives in: a relative PAWWAKE_DATA_DIR is taken from here, so starting
# the program from another folder never starts a new, empty database somewhere else.
PROGRAM_DIR = Path(__file__).resolve().parent.parent
T = TypeVar("T")


class SettingError(ValueError):
    """A value that does not fit its setting (wrong type, out of range, unknown key)."""

    def __init__(self, name: str, message: str, code: str = "invalid",
                 **values: Any) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message  # English, for the API and logs
        self.code = code  # for the dashboard, which words it in the reader's language
        self.values = values


@dataclass(frozen=True)
class Setting(Generic[T]):
    """One configuration value: its type, default and documentation; its environment name is
    the attribute it is given in the table (``Settings``), where it also tells the type
    checker the type of ``settings.NAME``."""

    kind: str  # "str" | "url" | "optional_url" | "int" | "float" | "bool" | "choice" |
    #            "optional_float"
    default: T
    group: str
    help_zh: str
    help_en: str
    hot: bool = True
    secret: bool = False
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    multiline: bool = False
    model_picker: bool = False
    max_chars: int | None = None  # text settings: the longest value accepted
    required: bool = False  # a "str" that may not be empty
    # Decides where a provider key is sent (a base URL, a key): changed only from a dashboard
    # session or with ADMIN_SECRET, never with the gateway key every chat client carries.
    admin: bool = False
    name: str = field(default="", init=False)

    def __set_name__(self, owner: type, name: str) -> None:
        object.__setattr__(self, "name", name)

    @overload
    def __get__(self, snapshot: None, owner: type) -> Setting[T]: ...

    @overload
    def __get__(self, snapshot: Settings, owner: type) -> T: ...

    def __get__(self, snapshot: Settings | None, owner: type) -> Setting[T] | T:
        """The value in a snapshot (each snapshot holds its values as its own attributes,
        so this runs only for the class: ``Settings.PORT`` is the table's entry)."""
        if snapshot is None:
            return self
        return cast(T, snapshot[self.name])


# One per kind, so each entry's type (its default's, and what ``settings.NAME`` reads as)
# follows from its kind.
@overload
def setting(kind: Literal["str", "url", "optional_url", "choice"], default: str, group: str,
            zh: str, en: str, **extra: Any) -> Setting[str]: ...
@overload
def setting(kind: Literal["bool"], default: bool, group: str, zh: str, en: str,
            **extra: Any) -> Setting[bool]: ...
@overload
def setting(kind: Literal["int"], default: int, group: str, zh: str, en: str,
            **extra: Any) -> Setting[int]: ...
@overload
def setting(kind: Literal["float"], default: float, group: str, zh: str, en: str,
            **extra: Any) -> Setting[float]: ...
@overload
def setting(kind: Literal["optional_float"], default: float | None, group: str, zh: str,
            en: str, **extra: Any) -> Setting[float | None]: ...
def setting(kind: str, default: Any, group: str, zh: str, en: str, **extra: Any
            ) -> Setting[Any]:
    return Setting(kind, default, group, zh, en, **extra)


class Settings(Mapping[str, Any]):
    """An immutable snapshot of every setting's value, and the table of every setting.

    The class body is the table: an entry's attribute name is its environment variable, and
    code reads its value as that attribute (``settings.API_KEY``), typed by the entry's kind,
    so the type checker knows each value's type and catches a misspelt name; the mapping form
    (``settings["API_KEY"]``) serves code that walks the table by name (the settings page and
    API). ``Settings.API_KEY`` is the entry itself.
    """

    # basic connection
    API_KEY = setting(
        "str", "", "basic", "你的 LLM API Key", "Your LLM provider API key",
        secret=True, admin=True)
    API_BASE_URL = setting(
        "url", "https://openrouter.ai/api/v1/chat/completions", "basic",
        "LLM API 地址（可填 …/v1 或完整的 …/chat/completions）",
        "LLM API address (either …/v1 or the full …/chat/completions URL)", admin=True)
    RESPONSES_BASE_URL = setting(
        "optional_url", "", "basic",
        "OpenAI Responses API 地址（/v1/responses 转发到这里）；留空则由 API_BASE_URL 推出 …/v1/responses",
        "OpenAI Responses API address (/v1/responses goes there); empty: API_BASE_URL's "
        "…/v1/responses", admin=True)
    DEFAULT_MODEL = setting(
        "str", "anthropic/claude-sonnet-4.5", "basic",
        "默认模型（请求未指定 model 时使用）", "Default model when a request names none",
        model_picker=True, required=True)
    PORT = setting(
        "int", 8000, "basic", "监听端口", "Port to listen on", hot=False,
        minimum=1, maximum=65535)
    GATEWAY_SECRET = setting(
        "str", "", "basic",
        "程序 API 鉴权密钥，客户端通过 X-Gateway-Key 或 Authorization: Bearer 发送",
        "API key for programs, sent as X-Gateway-Key or Authorization: Bearer",
        hot=False, secret=True)
    DASHBOARD_PASSWORD = setting(
        "str", "", "basic", "Dashboard 登录密码，不与网关密钥共用",
        "Dashboard login password, separate from the gateway key", hot=False, secret=True)
    SESSION_SECRET = setting(
        "str", "", "basic",
        "Dashboard 会话签名密钥，至少 32 字符且每次部署保持不变",
        "Dashboard session key, at least 32 characters, stable across deploys",
        hot=False, secret=True)
    ADMIN_SECRET = setting(
        "str", "", "basic",
        "管理密钥：改动决定服务商密钥发往何处的设置（各 BASE_URL 与各 API Key）时，"
        "PUT /api/settings 须另带请求头 X-Admin-Key；留空则只能在 Dashboard 里改。不要与 GATEWAY_SECRET 相同",
        "Admin key: PUT /api/settings may change the settings that decide where provider keys "
        "are sent (every BASE_URL and API key) only with this in an X-Admin-Key header; empty: "
        "only the dashboard may. Must differ from GATEWAY_SECRET",
        hot=False, secret=True)
    # database and memory
    DATABASE_ENABLED = setting(
        "bool", True, "memory",
        "数据库总开关；false 时关闭记忆、分区缓存和对话召回，纯转发。改动需重启",
        "Database master switch; false turns off memory, partition cache and recall "
        "(pure forwarding). Needs a restart", hot=False)
    DATABASE_URL = setting(
        "str", "", "memory",
        "PostgreSQL 连接字符串；留空则使用内置数据库（数据在 PAWWAKE_DATA_DIR）",
        "PostgreSQL connection string; empty runs the embedded database in PAWWAKE_DATA_DIR",
        hot=False, secret=True)
    DATABASE_POOL_SIZE = setting(
        "int", 10, "memory",
        "每个网关进程最多占用的数据库连接数；多副本时 副本数 × 此值 要小于数据库（或连接池 PgBouncer）"
        "允许的连接数，见 docs/SCALING.md",
        "Most database connections one gateway process opens; with several replicas, "
        "replicas x this must stay below what the database (or its pooler) allows, see "
        "docs/SCALING.md", hot=False, minimum=2, maximum=100)
    PAWWAKE_DATA_DIR = setting(
        "str", "data", "memory",
        "数据目录（内置数据库、分词缓存）；相对路径从程序所在的文件夹算起，与启动时所在的目录无关",
        "Data folder (embedded database, tokenizer cache); a relative path is taken from the "
        "program's folder, whatever folder it is started from", hot=False)
    MEMORY_ENABLED = setting(
        "bool", True, "memory", "开启记忆", "Turn long-term memory on")
    MEMORY_MODEL = setting(
        "str", "", "memory",
        "记忆提取、评分、整理共用的模型（推荐便宜的小模型）。留空使用内置的便宜默认："
        "OpenRouter 为 anthropic/claude-haiku-4.5，OpenAI 为 gpt-4.1-mini，Google 为 "
        "gemini-2.5-flash-lite；其他服务商回退到 DEFAULT_MODEL",
        "Model for extraction, scoring and consolidation (a small, cheap one is best). Empty "
        "uses a cheap built-in default: anthropic/claude-haiku-4.5 on OpenRouter, gpt-4.1-mini "
        "on OpenAI, gemini-2.5-flash-lite on Google; other providers fall back to DEFAULT_MODEL",
        model_picker=True)
    MEMORY_MAX_TOKENS = setting(
        "int", 4000, "memory",
        "记忆提取、评分和整理单批次的输出上限", "Output cap for one extraction/scoring batch",
        minimum=100, maximum=64000)
    MAX_MEMORIES_INJECT = setting(
        "int", 15, "memory", "每次注入的最大记忆条数，0 禁用自动注入",
        "Most memories injected per request; 0 turns injection off", minimum=0, maximum=100)
    MEMORY_SEEN_TTL_HOURS = setting(
        "float", 6.0, "memory",
        "分区模式按记忆去重的小时数；成功响应后标记，0 关闭",
        "Hours a memory injected into a session is not injected again; 0 turns it off",
        minimum=0, maximum=720)
    MIN_SCORE_THRESHOLD = setting(
        "float", 0.15, "memory", "记忆搜索最低分数阈值（0=不过滤）",
        "Lowest memory score that is injected (0 = no filter)", minimum=0, maximum=1)
    MEMORY_INJECT_MIN_RELEVANCE = setting(
        "float", 0.5, "memory",
        "注入下限：相关度（0..1，与库的大小无关，关键词模式和混合模式同一尺度）低于它的记忆不注入；调高更严（0=不过滤）",
        "Injection floor: memories whose relevance (0..1, the same at any store size, one scale for keyword-only and hybrid search) is below it are not injected; higher is stricter (0 = no filter)",
        minimum=0, maximum=1)
    MEMORY_DESCRIBE = setting(
        "bool", True, "memory",
        "让记忆模型为没有经它写过的记忆（API、Dashboard 添加、未评分导入）补写中英双语关键词和问题，"
        "中文问题才找得到英文记忆；每 20 条一次模型调用",
        "Let the memory model write keywords and questions in Chinese and English for memories "
        "added without it (API, dashboard, imports without scoring), so a question in one "
        "language finds a memory in the other; one model call per 20 memories")
    MEMORY_EXTRACT_INTERVAL = setting(
        "int", 1, "memory",
        "记忆提取间隔（0=禁用/1=每轮/N=每 N 轮）",
        "Extraction cadence (0 off, 1 every round, N every N rounds)", minimum=0, maximum=1000)
    TIMEZONE_HOURS = setting(
        "float", 8.0, "memory", "时区偏移（小时），用于日期显示",
        "Time zone offset in hours, used for dates shown to the model and you",
        minimum=-12, maximum=14)
    # partition cache
    CACHE_PARTITION_ENABLED = setting(
        "bool", False, "partition", "分区缓存开关",
        "Partition cache on/off")
    CACHE_PARTITION_X = setting(
        "int", 15, "partition", "轮转周期（轮数）",
        "Rotation period in rounds", minimum=1, maximum=500)
    CACHE_SUMMARY_MODEL = setting(
        "str", "", "partition",
        "摘要模型。留空 = 不生成摘要，轮转时旧消息直接滑出",
        "Summary model; empty slides old rounds out without a summary", model_picker=True)
    CACHE_SUMMARY_MAX_TOKENS = setting(
        "int", 2000, "partition", "摘要的输出上限",
        "Output cap for a summary", minimum=100, maximum=64000)
    CACHE_SUMMARY_BUDGET_CHARS = setting(
        "int", 8000, "partition",
        "摘要区总字符预算，超过时折叠最旧的摘要；0 = 不折叠",
        "Character budget of the summary zone; older parts are folded above it (0 = never)",
        minimum=0, maximum=1_000_000)
    PARTITION_SESSION_ID = setting(
        "str", "default", "partition", "固定的对话线 session ID",
        "Fixed session id of the active thread")
    CACHE_PARTITION_TRIGGER = setting(
        "choice", "rounds", "partition",
        "轮转触发方式：rounds（按轮次）或 time（按时间窗口）",
        "Rotation trigger: rounds, or time (a time window)", choices=("rounds", "time"))
    CACHE_PARTITION_WINDOW = setting(
        "int", 30, "partition", "时间窗口（分钟），仅 time 模式生效",
        "Time window in minutes (time trigger only)", minimum=1, maximum=100_000)
    CACHE_MAX_ROTATIONS = setting(
        "int", 2, "partition", "时间窗口模式下单次请求最大轮转次数",
        "Most rotations per request in time mode", minimum=1, maximum=20)
    CACHE_TTL = setting(
        "choice", "5m", "partition", "缓存有效期：5m 或 1h",
        "Prompt cache lifetime: 5m or 1h", choices=("5m", "1h"))
    # vector search
    MEMORY_VECTOR_ENABLED = setting(
        "bool", True, "vector", "记忆向量搜索开关",
        "Semantic (vector) memory search on/off")
    EMBEDDING_PROVIDER = setting(
        "choice", "auto", "vector",
        "向量来源：auto（有 EMBEDDING_API_KEY 时用 API，否则用内置本地模型）、api、local",
        "Embedding source: auto (api when EMBEDDING_API_KEY is set, else the bundled local "
        "model), api, local", choices=("auto", "api", "local"))
    EMBEDDING_API_KEY = setting(
        "str", "", "vector", "Embedding API Key", "Embedding API key",
        secret=True, admin=True)
    EMBEDDING_BASE_URL = setting(
        "url", "https://api.openai.com/v1", "vector", "Embedding API 地址",
        "Embedding API address", admin=True)
    EMBEDDING_MODEL = setting(
        "str", "text-embedding-3-small", "vector", "Embedding 模型",
        "Embedding model", required=True)
    EMBEDDING_DIM = setting(
        "int", 256, "vector", "向量维度（API 模式）",
        "Vector dimension (api provider)", minimum=8, maximum=8192)
    QUERY_EMBEDDING_TIMEOUT = setting(
        "float", 1.5, "vector",
        "聊天等待查询向量的最长秒数；超时后本次只按关键词搜索",
        "Seconds a chat waits for its query's vector; past it the search uses keywords only",
        minimum=0.05, maximum=60)
    QUERY_EMBEDDING_MAX_WAIT = setting(
        "float", 0.1, "vector",
        "本地模型忙时，查询向量预计要排队超过这么多秒就不排队，本次立即只按关键词搜索；0 表示总是排队",
        "With the local model busy, a chat whose query would queue longer than this many seconds "
        "searches by keywords at once; 0 always queues", minimum=0, maximum=60)
    MEMORY_HW_KEYWORD = setting(
        "float", 0.25, "vector", "混合搜索：关键词权重",
        "Hybrid search: keyword weight", minimum=0, maximum=1)
    MEMORY_HW_SEMANTIC = setting(
        "float", 0.65, "vector", "混合搜索：语义相似度权重",
        "Hybrid search: semantic weight", minimum=0, maximum=1)
    MEMORY_HW_IMPORTANCE = setting(
        "float", 0.05, "vector", "混合搜索：重要程度权重",
        "Hybrid search: importance weight", minimum=0, maximum=1)
    MEMORY_HW_RECENCY = setting(
        "float", 0.05, "vector", "混合搜索：时间衰减权重",
        "Hybrid search: recency weight", minimum=0, maximum=1)
    MEMORY_SEMANTIC_THRESHOLD = setting(
        "optional_float", None, "vector",
        "语义噪声下限（原始余弦）；候选按在查询近邻中的名次入选；留空按向量来源取默认值（API 0.3，本地模型 0.72）",
        "Semantic noise floor (raw cosine); candidates are admitted by rank among the query's neighbours; empty uses the provider's default (api 0.3, local 0.72)",
        minimum=0, maximum=1)
    VECTOR_BACKEND = setting(
        "choice", "auto", "vector",
        "向量检索后端：auto（有 pgvector 用 pgvector）、pgvector、numpy",
        "Vector search backend: auto (pgvector when present), pgvector, numpy",
        choices=("auto", "pgvector", "numpy"))
    # conversation recall
    CONVERSATION_RECALL_ENABLED = setting(
        "bool", False, "recall", "对话召回总开关",
        "Conversation recall on/off")
    MAX_CONVERSATIONS_INJECT = setting(
        "int", 3, "recall",
        "分区模式每轮最多自动注入的历史对话片段数；0 关闭",
        "Most past-conversation fragments injected per round in partition mode; 0 off",
        minimum=0, maximum=50)
    CONVERSATION_SEEN_TTL_HOURS = setting(
        "float", 6.0, "recall",
        "分区模式按 fragment_id 去重的小时数；0 关闭", "Hours a fragment is not re-injected; 0 off",
        minimum=0, maximum=720)
    CONVERSATION_MIN_SCORE_THRESHOLD = setting(
        "optional_float", None, "recall",
        "对话语义候选的最低原始余弦相似度；留空按向量来源取默认值（API 0.3，本地模型 0.72）",
        "Lowest raw cosine for a semantic conversation match; empty uses the provider's "
        "default (api 0.3, local 0.72)", minimum=0, maximum=1)
    CONVERSATION_HW_KEYWORD = setting(
        "float", 0.45, "recall", "对话混合搜索：每条消息的关键词权重",
        "Conversation search: keyword weight of each message's score", minimum=0, maximum=1)
    CONVERSATION_HW_SEMANTIC = setting(
        "float", 0.35, "recall", "对话混合搜索：每条消息的语义相似度权重",
        "Conversation search: semantic weight of each message's score", minimum=0, maximum=1)
    CONVERSATION_HW_RECENCY = setting(
        "float", 0.2, "recall", "对话混合搜索：每条消息的时间衰减权重（1/(1+天数)）",
        "Conversation search: recency weight of each message's score (1/(1+days))", minimum=0, maximum=1)
    # advanced
    FORCE_STREAM = setting(
        "bool", False, "advanced", "强制所有请求走流式传输",
        "Force every request to stream")
    MESSAGES_BASE_URL = setting(
        "optional_url", "", "advanced",
        "Anthropic Messages 上游地址（/v1/messages 用）；留空按 API_BASE_URL 的服务商推出，"
        "如 OpenRouter 为 https://openrouter.ai/api/v1/messages",
        "Upstream for Anthropic Messages (/v1/messages); empty: derived from API_BASE_URL's "
        "provider, e.g. https://openrouter.ai/api/v1/messages for OpenRouter", admin=True)
    MESSAGES_API_KEY = setting(
        "str", "", "advanced",
        "Messages 上游的 API Key；留空使用 API_KEY", "API key for the Messages upstream; "
        "empty uses API_KEY", secret=True, admin=True)
    MESSAGES_AUTH_HEADER = setting(
        "choice", "auto", "advanced",
        "Messages 上游的鉴权方式：auto（api.anthropic.com 用 x-api-key，其余用 Bearer）、"
        "bearer、x-api-key",
        "How the Messages key is sent: auto (x-api-key for api.anthropic.com, Bearer "
        "elsewhere), bearer, x-api-key", choices=("auto", "bearer", "x-api-key"))
    REASONING_EFFORT = setting(
        "choice", "", "advanced",
        "推理强度（low/medium/high），留空不注入", "Reasoning effort (low/medium/high); empty: none",
        choices=("", "low", "medium", "high"))
    SYSTEM_PROMPT = setting(
        "str", "", "advanced",
        "运行时人设；留空使用 system_prompt.txt（最多 100,000 字）",
        "Runtime persona; empty uses system_prompt.txt (at most 100,000 characters)",
        multiline=True, max_chars=100_000)
    UPSTREAM_CONNECT_TIMEOUT = setting(
        "float", 15.0, "advanced", "连接上游的超时（秒）",
        "Seconds to wait for the upstream connection", minimum=1, maximum=300)
    UPSTREAM_READ_TIMEOUT = setting(
        "float", 300.0, "advanced",
        "上游两次数据之间的最长等待（秒），长回复不受总时长限制",
        "Longest silence between upstream bytes, in seconds (no cap on total length)",
        minimum=1, maximum=3600)
    CORS_ALLOW_ORIGINS = setting(
        "str", "*", "advanced",
        "允许在浏览器里跨域调用 /v1 的来源，逗号分隔；* 为任意来源（需设置 GATEWAY_SECRET），留空关闭",
        "Origins whose browser pages may call /v1 (CORS), comma-separated; * for any "
        "(needs GATEWAY_SECRET); empty: off")
    MAX_REQUEST_MB = setting(
        "int", 32, "advanced", "单个请求体的最大大小（MB）",
        "Largest request body in MB", hot=False, minimum=1, maximum=1024)
    JOB_WORKERS = setting(
        "int", 2, "advanced", "后台任务（记忆提取、向量补算等）的并发数",
        "Concurrent background workers (extraction, embedding backfill...)", hot=False,
        minimum=0, maximum=16)
    TURN_SPOOL_MAX_MB = setting(
        "int", 64, "advanced",
        "数据库不可用时暂存对话轮次的磁盘上限（MB，位于数据目录）；满了保留最早的、丢弃并计数新的",
        "Disk cap in MB for chat turns kept while the database is unreachable (in the data "
        "folder); when full the oldest are kept and new ones dropped and counted", hot=False,
        minimum=1, maximum=10240)
    SHUTDOWN_GRACE_SECONDS = setting(
        "int", 15, "advanced",
        "收到 SIGTERM（重新部署）后，正在流式输出的回复最多还能继续多少秒；到时仍未结束的以协议内的"
        "错误事件收尾，未说完的部分保存为未完成的轮次。进程在此之后约 10 秒内退出",
        "How long replies still streaming may run on after SIGTERM (a redeploy); those still "
        "open then end with an error event of their protocol and are kept as incomplete turns. "
        "The process exits about 10 s after that", hot=False, minimum=0, maximum=300)
    LOG_LEVEL = setting(
        "choice", "INFO", "advanced", "日志级别", "Log level", hot=False,
        choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    TRUSTED_PROXIES = setting(
        "str", "", "advanced",
        "可信反向代理的地址或网段（逗号分隔，如 10.0.0.0/8；private = 所有内网地址）。只有直接连入的"
        "对端在此列表中时，才采信 X-Forwarded-For/Proto/Host 与 Forwarded；留空则一律不采信",
        "Reverse proxies to believe, as addresses or networks (comma-separated, e.g. 10.0.0.0/8; "
        "private = every private address). X-Forwarded-For/Proto/Host and Forwarded count only "
        "when the direct peer is listed; empty: never", hot=False)
    ALLOWED_HOSTS = setting(
        "str", "", "advanced",
        "未设置 GATEWAY_SECRET 时，除本机地址（localhost、127.0.0.1、::1）外网关还接受的主机名，"
        "逗号分隔，如 pawwake.lan, 192.168.1.5（防 DNS 重绑定）；设置了 GATEWAY_SECRET 时不起作用",
        "Host names the gateway answers besides loopback (localhost, 127.0.0.1, ::1) while "
        "GATEWAY_SECRET is unset, comma-separated, e.g. pawwake.lan, 192.168.1.5 (against DNS "
        "rebinding); no effect once GATEWAY_SECRET is set", hot=False)

    # -- the snapshot ---------------------------------------------------------------------------

    def __init__(self, values: Mapping[str, Any]) -> None:
        unknown = set(values) - set(BY_NAME)
        if unknown:
            raise SettingError(sorted(unknown)[0], "unknown setting", "unknown")
        resolved = {s.name: values.get(s.name, s.default) for s in SETTINGS}
        resolved["PAWWAKE_DATA_DIR"] = data_folder(resolved["PAWWAKE_DATA_DIR"])
        self._values: dict[str, Any]  # declared here, out of the class's setting attributes
        object.__setattr__(self, "_values", resolved)
        for name, value in resolved.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Settings is immutable; use with_values()")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Defaults, then the environment, then explicit keyword overrides (already typed)."""
        environ = os.environ if environ is None else environ
        values = {s.name: parse_value(s, environ[s.name]) for s in SETTINGS if s.name in environ}
        values.update(overrides)
        return cls(values)

    def with_values(self, changes: Mapping[str, Any]) -> Settings:
        return Settings({**self._values, **changes})

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    @property
    def database_on(self) -> bool:
        return self.DATABASE_ENABLED

    @property
    def chat_completions_url(self) -> str:
        """API_BASE_URL may be a base (``…/v1``) or the full endpoint; return the endpoint."""
        base = self.API_BASE_URL.rstrip("/")
        if base.endswith("/chat/completions"):
            return base
        return base + "/chat/completions"

    @property
    def responses_url(self) -> str:
        """RESPONSES_BASE_URL (a base or the full endpoint), else the chat provider's base +
        ``/responses`` (OpenRouter: ``…/api/v1/responses``, OpenAI: ``…/v1/responses``)."""
        base = self.RESPONSES_BASE_URL.strip().rstrip("/") or self.api_base
        return base if base.endswith("/responses") else base + "/responses"

    @property
    def api_base(self) -> str:
        """The provider's base URL (``…/v1``), for ``/models`` and the like."""
        url = self.chat_completions_url
        return url[: -len("/chat/completions")]


# The table's entries in order, and by name.
SETTINGS: tuple[Setting[Any], ...] = tuple(
    entry for entry in vars(Settings).values() if isinstance(entry, Setting))
BY_NAME: dict[str, Setting[Any]] = {entry.name: entry for entry in SETTINGS}

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def parse_value(setting: Setting[Any], raw: Any) -> Any:
    """Turn an environment string or a JSON value into the setting's type, or raise."""
    kind = setting.kind
    if kind == "bool":
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in _TRUE | _FALSE:
            return raw.strip().lower() in _TRUE
        raise SettingError(setting.name, "expected true or false", "expected_bool")
    if kind in ("int", "float", "optional_float"):
        if kind == "optional_float" and (raw is None or (isinstance(raw, str) and not raw.strip())):
            return None
        value = _parse_number(setting, raw, integer=kind == "int")
        if setting.minimum is not None and value < setting.minimum:
            raise SettingError(setting.name, f"must be at least {setting.minimum:g}", "too_small",
                               limit=f"{setting.minimum:g}")
        if setting.maximum is not None and value > setting.maximum:
            raise SettingError(setting.name, f"must be at most {setting.maximum:g}", "too_large",
                               limit=f"{setting.maximum:g}")
        return value
    if not isinstance(raw, str):
        raise SettingError(setting.name, "expected a string", "expected_text")
    if kind == "choice":
        choice = raw.strip()
        if choice not in setting.choices:
            raise SettingError(setting.name, "must be one of " + ", ".join(
                repr(c) for c in setting.choices), "not_a_choice",
                choices=" / ".join(setting.choices))
        return choice
    if kind in ("url", "optional_url"):
        return _parse_url(setting, raw.strip())
    text = raw if setting.multiline else raw.strip()
    if setting.required and not text.strip():
        raise SettingError(setting.name, "must not be empty", "empty")
    if setting.max_chars is not None and len(text) > setting.max_chars:
        raise SettingError(setting.name, f"is limited to {setting.max_chars:,} characters "
                           f"({len(text):,} given)", "too_long", limit=f"{setting.max_chars:,}")
    return text


def _parse_url(setting: Setting[Any], text: str) -> str:
    """An http(s) URL with a host (empty for an optional one); no credentials in it, since a
    URL is shown in full wherever settings are (keys have settings of their own)."""
    if not text and setting.kind == "optional_url":
        return ""
    try:
        parts = urlsplit(text)
        usable = (parts.scheme in ("http", "https") and bool(parts.hostname)
                  and not any(c.isspace() for c in text) and parts.port != 0)
    except ValueError:
        usable = False
    if not usable:
        raise SettingError(setting.name, "must be an http:// or https:// URL with a host, like "
                                         "https://openrouter.ai/api/v1", "not_a_url")
    if parts.username is not None or parts.password is not None:
        raise SettingError(setting.name, "must not carry a user name or password; put the key "
                                         "in its API key setting", "url_credentials")
    return text


def environment_errors(environ: Mapping[str, str]) -> list[SettingError]:
    """Every value in ``environ`` that no setting would take, and ADMIN_SECRET when it is the
    gateway key itself (it would protect nothing every client does not already hold)."""
    errors: list[SettingError] = []
    for setting in SETTINGS:
        if setting.name in environ:
            try:
                parse_value(setting, environ[setting.name])
            except SettingError as exc:
                errors.append(exc)
    admin, gateway = environ.get("ADMIN_SECRET", "").strip(), \
        environ.get("GATEWAY_SECRET", "").strip()
    if admin and admin == gateway:
        errors.append(SettingError("ADMIN_SECRET", "must differ from GATEWAY_SECRET",
                                   "same_as_gateway"))
    return errors


def _parse_number(setting: Setting[Any], raw: Any, *, integer: bool) -> float | int:
    if isinstance(raw, bool):
        raise SettingError(setting.name, "expected a number", "expected_number")
    if isinstance(raw, str):
        try:
            raw = int(raw.strip()) if integer else float(raw.strip())
        except ValueError:
            raise SettingError(setting.name, "expected a number", "expected_number") from None
    if integer:
        if isinstance(raw, float) and raw.is_integer():
            raw = int(raw)
        if not isinstance(raw, int):
            raise SettingError(setting.name, "expected a whole number", "expected_integer")
        return raw
    if not isinstance(raw, (int, float)) or not math.isfinite(raw):
        raise SettingError(setting.name, "expected a number", "expected_number")
    return float(raw)


MASK = "\u2022\u2022\u2022\u2022"  # "••••": what stands for the hidden part of a secret
MASK_MARKERS = (MASK, "****")  # "****" is the older mask; a value holding either is a mask
TAIL_MIN_LENGTH = 12  # shorter keys show no character at all
# Provider keys may show their last four characters, so a user can tell which key is in force.
# Every other secret (passwords, session and gateway secrets, DATABASE_URL) shows only whether
# it is set: a new secret setting is presence-only unless it is added here.
TAIL_SECRETS = frozenset({"API_KEY", "EMBEDDING_API_KEY", "MESSAGES_API_KEY"})


def mask_secret(value: str, *, show_tail: bool = False) -> str:
    """``""`` when unset; ``••••1234`` for a long provider key; ``••••`` for anything else."""
    if not value:
        return ""
    if show_tail and len(value) >= TAIL_MIN_LENGTH:
        return MASK + value[-4:]
    return MASK


def secret_display(setting: Setting[Any], value: Any) -> str | None:
    """What of a secret setting's value may be shown anywhere: None for presence-only ones."""
    if setting.name not in TAIL_SECRETS:
        return None
    return mask_secret(value or "", show_tail=True)


def data_folder(value: str) -> str:
    """PAWWAKE_DATA_DIR as an absolute path: ``~`` expanded, a relative one from PROGRAM_DIR."""
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else PROGRAM_DIR / path)


def secret_form_value(setting: Setting[Any], value: Any) -> str:
    """The mask a form holds for a secret; sent back unchanged it means "keep"."""
    shown = secret_display(setting, value)
    return shown if shown is not None else mask_secret(value or "")

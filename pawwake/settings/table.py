"""Every setting Pawwake knows, in one declarative table: the body of ``SettingsTable``.

An entry's attribute name is its environment variable; its kind (``setting("int", ...)``)
types its default and the value code reads (``settings.API_KEY``), so the type checker knows
each value's type and catches a misspelt name. ``Settings`` (``pawwake.settings``), the
snapshot of values, inherits the table: ``Settings.API_KEY`` is the entry itself.
"""

from __future__ import annotations

from pawwake.settings.entry import setting


class SettingsTable:
    """The entries, grouped as the settings page shows them (``GROUPS``)."""

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
    DATABASE_DIRECT = setting(
        "bool", False, "memory",
        "DATABASE_URL 直连 PostgreSQL（中间没有事务模式连接池）：搜索语句在每个连接上只规划一次"
        "（预编译）；内置数据库总是如此",
        "DATABASE_URL reaches PostgreSQL itself (no transaction-mode pooler in between): search "
        "statements are planned once per connection (prepared); always so on the embedded "
        "database", hot=False)
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
        "向量检索后端：auto（表小时在进程内检索，大时用 pgvector，见 VECTOR_INDEX_MAX_ROWS）、pgvector、numpy",
        "Vector search backend: auto (in process while a table is small, pgvector above "
        "VECTOR_INDEX_MAX_ROWS when present), pgvector, numpy",
        choices=("auto", "pgvector", "numpy"))
    VECTOR_INDEX_MAX_ROWS = setting(
        "int", 0, "vector",
        "auto 时每张向量表（记忆、对话消息；记忆的问题总用 pgvector）在进程内检索的最多向量数，超过改用 pgvector；"
        "0（默认）表示有 pgvector 就总用它；每 1 万条 384 维向量约占 17 MB 内存",
        "With auto: the most vectors a table (memories, conversation messages; written "
        "questions always use pgvector) may hold to be searched in process; above it pgvector is used; 0 (the "
        "default): pgvector whenever present. Each 10,000 vectors of 384 dims take about 17 MB of memory",
        minimum=0, maximum=10_000_000)
    NUMPY_QUESTION_ROWS = setting(
        "int", 100_000, "vector",
        "numpy 索引最多保存多少条记忆问题向量（最新的优先；每条约 1.5 KB，100000 条约 147 MB）；"
        "更早的问题仍按关键词找到；0 表示问题只按关键词",
        "Most written-question vectors the numpy index holds (the newest first; about 1.5 KB "
        "each, 147 MB at 100000); older questions are still found by their keywords; 0: "
        "questions by keywords only", minimum=0, maximum=10_000_000)
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
    REQUEST_HEADER_TIMEOUT = setting(
        "float", 10.0, "advanced",
        "一个请求的请求头从第一个字节起必须在多少秒内收完，否则回复 408 并断开连接（防止慢速攻击）",
        "Seconds a request's headers may take to arrive from their first byte; past them the "
        "client gets a 408 and the connection is closed (slow clients)",
        hot=False, minimum=1, maximum=600)
    REQUEST_BODY_TIMEOUT = setting(
        "float", 60.0, "advanced",
        "请求头收完后，请求体必须在多少秒内收完，否则回复 408 并断开连接",
        "Seconds a request's body may take to arrive once its headers are in; past them the "
        "client gets a 408 and the connection is closed", hot=False, minimum=1, maximum=3600)
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

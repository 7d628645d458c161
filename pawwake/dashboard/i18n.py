"""Every dashboard string in Simplified Chinese (the default) and English, and the language switch."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from pawwake.dashboard import dashboard_keys as dkeys
from pawwake.dashboard.i18n_conversations import CONVERSATION_STRINGS
from pawwake.dashboard.i18n_memories import MEMORY_STRINGS
from pawwake.dashboard.i18n_memory_tools import MEMORY_TOOL_STRINGS
from pawwake.dashboard.i18n_threads import THREAD_STRINGS

DEFAULT_LANGUAGE = "zh"
LANGUAGES: tuple[str, ...] = ("zh", "en")
LANGUAGE_COOKIE = "pawwake_lang"

STRINGS: dict[str, dict[str, str]] = {
    "zh": {
        "app.name": "爪迹 Pawwake",
        "nav.label": "主导航",
        "nav.status": "运行状态",
        "nav.settings": "设置",
        "nav.logout": "退出登录",
        "lang.label": "语言",
        "lang.zh": "中文",
        "lang.en": "English",
        "login.title": "登录",
        "login.heading": "欢迎回来",
        "login.hint": "输入部署时设置的 DASHBOARD_PASSWORD 进入管理面板。",
        "login.password": "密码",
        "login.submit": "登录",
        "login.wrong": "密码不正确，请重试。",
        "login.locked": "尝试次数过多，请 {minutes} 分钟后再试。",
        "login.required": "登录已过期，请重新登录。",
        "login.signed_out": "已退出登录。",
        "status.title": "运行状态",
        "status.intro": "网关当前的运行情况。开关的改动在「设置」中保存后立即生效。",
        "status.overview": "概览",
        "status.version": "版本",
        "status.database": "数据库",
        "status.vectors": "向量检索",
        "status.memory": "长期记忆",
        "status.partition": "分区缓存",
        "status.recall": "对话召回",
        "status.upstream": "上游 API",
        "status.default_model": "默认模型",
        "status.gateway_key": "网关密钥",
        "status.gateway_key_set": "已设置",
        "status.gateway_key_open": "未设置：/v1 与 /api 无需密钥即可访问",
        "status.switches": "功能开关",
        "status.counts": "数据统计",
        "status.turn_spool": "待写入的对话",
        "status.turn_spool_counts": "{pending} 轮等待数据库 · 丢弃 {dropped} · 写入失败 {failed}",
        "status.messages": "对话消息",
        "status.sessions": "会话",
        "status.memories": "记忆",
        "status.memories_active": "其中有效",
        "status.tokens": "Token 用量",
        "status.requests": "记录次数",
        "status.prompt_tokens": "输入",
        "status.completion_tokens": "输出",
        "status.total_tokens": "合计",
        "status.no_database": "数据库已关闭（DATABASE_ENABLED=false），网关处于纯转发模式，没有统计数据。",
        "db.embedded": "内置 PostgreSQL",
        "db.external": "外部 PostgreSQL",
        "db.disabled": "已关闭（纯转发）",
        "vectors.pgvector": "pgvector",
        "vectors.numpy": "numpy（内存索引）",
        "vectors.none": "不可用",
        "switch.on": "开启",
        "switch.off": "关闭",
        "settings.title": "设置",
        "settings.intro": "保存后从下一次请求开始生效，无需重启。标有「环境变量」的设置只能在部署环境中修改，改动后需要重启。",
        "settings.filter": "筛选设置",
        "settings.filter_placeholder": "输入名称或说明筛选…",
        "settings.groups": "分组",
        "settings.save": "保存",
        "settings.saved": "已保存，下一次请求即生效。",
        "settings.unchanged": "没有改动。",
        "settings.error": "未保存：{message}",
        "settings.env_only": "环境变量",
        "settings.env_note": "只能在部署环境中设置，改动需重启",
        "settings.overridden": "面板已保存",
        "settings.secret_current": "当前：{value}",
        "settings.secret_unset": "未设置",
        "settings.secret_hint": "保持显示的掩码即不修改；输入新值即替换，清空即删除。",
        "settings.optional_hint": "留空使用默认值",
        "settings.chars": "字符",
        "settings.choice_empty": "（不设置）",
        "settings.models_loading": "正在获取模型列表…",
        "settings.models_found": "已从 {source} 获取 {count} 个模型，输入可筛选。",
        "settings.models_error": "暂时无法获取模型列表：{message}",
        "settings.models_link": "查看可用模型",
        "settings.pick_hint": "可直接输入模型 ID，或从列表中选择",
        "models.title": "可用模型",
        "models.intro": "来自当前 API_BASE_URL 的模型列表（缓存几分钟）。",
        "models.id": "模型 ID",
        "models.name": "名称",
        "models.context": "上下文长度",
        "models.back": "返回设置",
        "group.basic": "基础连接",
        "group.memory": "数据库与记忆",
        "group.partition": "分区缓存",
        "group.vector": "向量搜索",
        "group.recall": "对话召回",
        "group.advanced": "高级",
        "unavailable.title": "管理面板暂不可用",
        "unavailable.intro": "管理面板需要以下设置，请在部署环境中补齐后重启：",
        "unavailable.password": "DASHBOARD_PASSWORD 未设置（管理面板的登录密码，不要与网关密钥共用）。",
        "unavailable.secret": "SESSION_SECRET 未设置或少于 32 个字符（会话加密密钥，每次部署保持不变）。",
        "unavailable.generate": "可以这样生成一个随机值：",
        "unavailable.api_ok": "程序 API（/v1、/api）不受影响，仍可用 X-Gateway-Key 访问。",
        "error.title": "出错了",
        "error.origin": "请求来源无效（Invalid request origin.）。请从本站页面重新提交。",
        "error.not_found": "页面不存在。",
        "error.method": "不支持这种请求方式。",
        "error.internal": "服务器内部错误，请查看网关日志。",
        "error.back": "返回首页",
        "footer.text": "爪迹 Pawwake {version}",
    },
    "en": {
        "app.name": "Pawwake",
        "nav.label": "Main navigation",
        "nav.status": "Status",
        "nav.settings": "Settings",
        "nav.logout": "Sign out",
        "lang.label": "Language",
        "lang.zh": "中文",
        "lang.en": "English",
        "login.title": "Sign in",
        "login.heading": "Welcome back",
        "login.hint": "Enter the DASHBOARD_PASSWORD set for this deployment.",
        "login.password": "Password",
        "login.submit": "Sign in",
        "login.wrong": "Wrong password, please try again.",
        "login.locked": "Too many attempts; try again in {minutes} minutes.",
        "login.required": "Your session has ended; please sign in again.",
        "login.signed_out": "You are signed out.",
        "status.title": "Status",
        "status.intro": "How the gateway runs right now. Switches saved in Settings apply at once.",
        "status.overview": "Overview",
        "status.version": "Version",
        "status.database": "Database",
        "status.vectors": "Vector search",
        "status.memory": "Long-term memory",
        "status.partition": "Partition cache",
        "status.recall": "Conversation recall",
        "status.upstream": "Upstream API",
        "status.default_model": "Default model",
        "status.gateway_key": "Gateway key",
        "status.gateway_key_set": "Set",
        "status.gateway_key_open": "Not set: /v1 and /api accept requests without a key",
        "status.switches": "Features",
        "status.counts": "Numbers",
        "status.turn_spool": "Turns waiting",
        "status.turn_spool_counts": "{pending} waiting for the database · {dropped} dropped · {failed} failed",
        "status.messages": "Messages",
        "status.sessions": "Sessions",
        "status.memories": "Memories",
        "status.memories_active": "active",
        "status.tokens": "Token usage",
        "status.requests": "Records",
        "status.prompt_tokens": "Prompt",
        "status.completion_tokens": "Completion",
        "status.total_tokens": "Total",
        "status.no_database": "The database is off (DATABASE_ENABLED=false): the gateway only forwards, so there are no numbers.",
        "db.embedded": "Embedded PostgreSQL",
        "db.external": "External PostgreSQL",
        "db.disabled": "Off (forwarding only)",
        "vectors.pgvector": "pgvector",
        "vectors.numpy": "numpy (in-memory index)",
        "vectors.none": "Unavailable",
        "switch.on": "On",
        "switch.off": "Off",
        "settings.title": "Settings",
        "settings.intro": "Saved values apply from the next request, no restart needed. Settings marked “environment” can only be changed where the gateway is deployed, and need a restart.",
        "settings.filter": "Filter settings",
        "settings.filter_placeholder": "Type a name or a word from the help…",
        "settings.groups": "Groups",
        "settings.save": "Save",
        "settings.saved": "Saved; in effect from the next request.",
        "settings.unchanged": "Nothing changed.",
        "settings.error": "Not saved: {message}",
        "settings.env_only": "environment",
        "settings.env_note": "Set in the environment; needs a restart",
        "settings.overridden": "saved here",
        "settings.secret_current": "Current: {value}",
        "settings.secret_unset": "not set",
        "settings.secret_hint": "Keep the masked value to leave it unchanged; type a new one to replace it, clear it to remove it.",
        "settings.optional_hint": "Empty uses the default",
        "settings.chars": "characters",
        "settings.choice_empty": "(none)",
        "settings.models_loading": "Loading the model list…",
        "settings.models_found": "{count} models from {source}; type to filter.",
        "settings.models_error": "The model list is not available right now: {message}",
        "settings.models_link": "See available models",
        "settings.pick_hint": "Type a model id or pick one from the list",
        "models.title": "Available models",
        "models.intro": "Models offered by the current API_BASE_URL (cached for a few minutes).",
        "models.id": "Model id",
        "models.name": "Name",
        "models.context": "Context length",
        "models.back": "Back to settings",
        "group.basic": "Connection",
        "group.memory": "Database & memory",
        "group.partition": "Partition cache",
        "group.vector": "Vector search",
        "group.recall": "Conversation recall",
        "group.advanced": "Advanced",
        "unavailable.title": "Dashboard unavailable",
        "unavailable.intro": "The dashboard needs these settings; add them where the gateway is deployed and restart:",
        "unavailable.password": "DASHBOARD_PASSWORD is not set (the dashboard password; do not reuse the gateway key).",
        "unavailable.secret": "SESSION_SECRET is missing or shorter than 32 characters (the session key; keep it stable across deploys).",
        "unavailable.generate": "One way to generate a random value:",
        "unavailable.api_ok": "The program API (/v1, /api) keeps working with X-Gateway-Key.",
        "error.title": "Something went wrong",
        "error.origin": "Invalid request origin. Please submit again from this site's own pages.",
        "error.not_found": "This page does not exist.",
        "error.method": "This request method is not supported here.",
        "error.internal": "Internal error; see the gateway log.",
        "error.back": "Back to the start page",
        "footer.text": "Pawwake {version}",
    },
}

# Page families keep their strings in their own catalog modules.
for _catalog in (MEMORY_STRINGS, MEMORY_TOOL_STRINGS, CONVERSATION_STRINGS, THREAD_STRINGS):
    for _lang, _strings in _catalog.items():
        STRINGS[_lang].update(_strings)

Translator = Callable[..., str]


def translate(lang: str, key: str, **values: object) -> str:
    """The string for ``key`` in ``lang``; a missing key shows itself rather than failing."""
    text = STRINGS.get(lang, STRINGS[DEFAULT_LANGUAGE]).get(key)
    if text is None:
        text = STRINGS[DEFAULT_LANGUAGE].get(key, key)
    return text.format(**values) if values else text


def translator(lang: str) -> Translator:
    """A ``t(key, **values)`` bound to one language, for templates."""

    def t(key: str, **values: object) -> str:
        return translate(lang, key, **values)

    return t


def request_language(request: web.Request) -> str:
    """The visitor's language: the language cookie when valid, else Simplified Chinese."""
    cached = request.get(dkeys.LANGUAGE)
    if cached is not None:
        return cached
    chosen = request.cookies.get(LANGUAGE_COOKIE, DEFAULT_LANGUAGE)
    lang = chosen if chosen in LANGUAGES else DEFAULT_LANGUAGE
    request[dkeys.LANGUAGE] = lang
    return lang

"""The layers of docs/ARCHITECTURE.md, checked on every module's imports.

Imports are read from the source (``ast``), every one of them: at the top, inside functions
and under ``TYPE_CHECKING``, so a late import cannot hide a dependency the map denies.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pawwake

ROOT = Path(pawwake.__file__).resolve().parent
PACKAGE = "pawwake"

FEATURES = ("chat", "memory", "recall", "partition", "conversations")
LOWER = ("search", "llm", "text")
SERVICES = ("chat", "memory", "recall", "partition", "conversations", "search", "jobs", "job_kinds",
            "job_admin", "usage_report")
HTTP = ("routes", "dashboard", "mcp")


def module_name(path: Path, root: Path) -> str:
    parts = [PACKAGE, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def our_modules(root: Path) -> dict[str, Path]:
    return {module_name(path, root): path for path in sorted(root.rglob("*.py"))}


def imports_of(source: str, module: str, is_package: bool, known: set[str]
               ) -> Iterator[tuple[str, int]]:
    """``(imported module, line)`` for each import of ours in ``source``. ``from a import b``
    names module ``a.b`` when that is a module, else ``a``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE:
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = module.split(".") if is_package else module.split(".")[:-1]
                base_parts = base_parts[:len(base_parts) - (node.level - 1)]
                base = ".".join([*base_parts, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            if base.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                yield (candidate if candidate in known else base), node.lineno


def area(module: str) -> str:
    """The top-level part of ours a module belongs to: ``pawwake.recall.search`` is in
    ``recall``, ``pawwake.settings`` in ``settings``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def edges(root: Path = ROOT) -> list[tuple[str, str, int]]:
    modules = our_modules(root)
    known = set(modules)
    found = []
    for module, path in modules.items():
        for imported, line in imports_of(path.read_text(encoding="utf-8"), module,
                                         path.name == "__init__.py", known):
            found.append((module, imported, line))
    return found


def breaks(importer: Callable[[str], bool], forbidden: Callable[[str], bool]) -> list[str]:
    return [f"{module}:{line} imports {imported}" for module, imported, line in edges()
            if importer(module) and forbidden(imported)]


def in_areas(*names: str) -> Callable[[str], bool]:
    return lambda module: area(module) in names


def test_the_reader_sees_late_relative_and_type_checking_imports() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from pawwake import keys\n"
        "from . import rank\n"
        "if TYPE_CHECKING:\n"
        "    from pawwake.memory.store import memory_json\n"
        "def later():\n"
        "    import pawwake.routes.memories\n"
        "    from ..search import fusion\n"
    )
    known = {"pawwake.keys", "pawwake.recall.rank", "pawwake.search.fusion",
             "pawwake.memory.store", "pawwake.routes.memories"}
    found = {imported for imported, _ in
             imports_of(source, "pawwake.recall.search", False, known)}
    assert found == {"pawwake.keys", "pawwake.recall.rank", "pawwake.memory.store",
                     "pawwake.routes.memories", "pawwake.search.fusion"}
    assert area("pawwake.recall.search") == "recall" and area("pawwake.settings") == "settings"


def test_the_map_is_read_from_the_whole_package() -> None:
    found = edges()
    assert any(module == "pawwake.app" for module, _, _ in found)
    assert len({module for module, _, _ in found}) > 100


# The one place the chat flow calls memory: its memory step (see docs/ARCHITECTURE.md).
CHAT_TO_MEMORY = {"pawwake.chat.memory_step"}


def test_chat_and_memory_do_not_import_each_other() -> None:
    assert breaks(lambda m: area(m) == "chat" and m not in CHAT_TO_MEMORY,
                  in_areas("memory")) == []
    assert breaks(in_areas("memory"), in_areas("chat")) == []


# The chat flow's contract with its steps: what a step of another package may name of chat.
STEP_CONTRACT = {"pawwake.chat.prepared"}


def test_the_partition_cache_sits_under_the_chat_flow() -> None:
    """``partition/`` is a feature the chat flow uses (its step is in ``CHAT_STEPS``): of
    ``chat/`` it names only the steps' contract, and memory does not know it."""
    assert breaks(in_areas("partition"),
                  lambda imported: area(imported) == "chat" and imported not in STEP_CONTRACT
                  ) == []
    assert breaks(in_areas("memory"), in_areas("partition")) == []


def test_conversation_storage_sits_under_the_chat_flow_and_the_partition_cache() -> None:
    """``conversations/`` stores what the chat flow, the partition cache and sidecar ingest
    hand it; it names none of them, nor memory (the turn store keeps recall's index current,
    so it may name ``recall/``)."""
    assert breaks(in_areas("conversations"),
                  in_areas("chat", "partition", "memory", "protocols")) == []
    assert breaks(in_areas("memory"), in_areas("conversations")) == []


# Recall's chat step: the one module of recall/ that names the chat flow (its contract).
RECALL_STEP = "pawwake.recall.inject"


def test_conversation_recall_stands_beside_memory() -> None:
    """``recall/`` and ``memory/`` share only what lies below them (``search/``); of the chat
    flow recall names the steps' contract, from its step alone."""
    assert breaks(in_areas("recall"), in_areas("memory")) == []
    assert breaks(in_areas("memory"), in_areas("recall")) == []
    assert breaks(lambda module: area(module) == "recall" and module != RECALL_STEP,
                  in_areas("chat")) == []
    assert breaks(in_areas("recall"),
                  lambda imported: area(imported) == "chat" and imported not in STEP_CONTRACT
                  ) == []


# Packages whose state lives on objects the assembly builds (term statistics, vector stores,
# the backend's indexes), never in a module: two apps in one process share none of it.
STATELESS_MODULES = ("search", "recall", "memory")
MUTABLE_CALLS = {"dict", "set", "list", "defaultdict", "OrderedDict", "deque", "Counter",
                 "WeakKeyDictionary", "WeakValueDictionary", "WeakSet"}


def module_state(source: str) -> Iterator[tuple[str, int]]:
    """``(name, line)`` of each module-level name bound to a fresh mutable container (an
    empty literal or a container's constructor): a cache kept by the module."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        called = value.func if isinstance(value, ast.Call) else None
        name = (called.attr if isinstance(called, ast.Attribute)
                else called.id if isinstance(called, ast.Name) else "")
        empty = (isinstance(value, ast.Dict) and not value.keys) or (
            isinstance(value, (ast.List, ast.Set)) and not value.elts)
        if name in MUTABLE_CALLS or empty:
            for target in targets:
                yield ast.unparse(target), node.lineno


def test_the_state_reader_sees_module_caches_and_passes_constants() -> None:
    source = ("import weakref\n"
              "_BY_POOL: weakref.WeakKeyDictionary[int, int] = weakref.WeakKeyDictionary()\n"
              "_seen = set()\n"
              "LIMITS = {'a': 1}\n"
              "NAMES = ('x',)\n"
              "def f():\n"
              "    cache = {}\n")
    assert list(module_state(source)) == [("_BY_POOL", 2), ("_seen", 3)]


def test_search_memory_and_recall_keep_no_state_in_modules() -> None:
    found = [f"{module}:{line} {name}" for module, path in our_modules(ROOT).items()
             if area(module) in STATELESS_MODULES
             for name, line in module_state(path.read_text(encoding="utf-8"))]
    assert found == []


def test_the_relay_sits_between_the_routes_and_the_chat_flow() -> None:
    """``relay/`` is the turn engine: the routes and each protocol's turn are built on it, it
    names no route and no protocol, and nothing under the HTTP layer names it."""
    assert breaks(in_areas("relay"), in_areas(*HTTP, "protocols")) == []
    assert breaks(in_areas("protocols"), in_areas(*HTTP)) == []
    assert breaks(in_areas(*SERVICES, "llm", "text", "db"), in_areas("relay")) == []
    assert breaks(lambda module: area(module) == "protocols" and not module.endswith(".turn"),
                  in_areas("relay")) == []


def test_search_llm_and_text_import_no_feature_and_no_http_layer() -> None:
    assert breaks(in_areas(*LOWER), in_areas(*FEATURES, *HTTP)) == []


def test_db_imports_only_settings_storable_text_and_db() -> None:
    # text.messages: the message records the rounds read, the same rows db/ returns
    allowed = {"pawwake.settings", "pawwake.text.storable", "pawwake.text.messages"}
    assert breaks(in_areas("db"),
                  lambda imported: area(imported) != "db" and imported not in allowed) == []


def test_services_import_no_http_layer() -> None:
    assert breaks(in_areas(*SERVICES), in_areas(*HTTP)) == []


def test_mcp_imports_no_routes_and_no_dashboard() -> None:
    assert breaks(in_areas("mcp"), in_areas("routes", "dashboard")) == []


def test_every_module_the_architecture_map_names_exists() -> None:
    """The map is one hop to the code only while its paths are true (after a move, too)."""
    project = ROOT.parent
    text = (project / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`([\w/*.]+(?:\.py|/))`", text))
    bases = (project, ROOT, ROOT / "dashboard")
    missing = sorted(name for name in named
                     if not any(list(base.glob(name.rstrip("/"))) for base in bases))
    assert len(named) > 50
    assert missing == []


def test_route_modules_import_each_other_without_cycles() -> None:
    """A route module that imports another one is never imported back (not even late)."""
    graph: dict[str, set[str]] = {}
    for module, imported, _ in edges():
        if area(module) == area(imported) == "routes" and module != imported \
                and imported != "pawwake.routes":
            graph.setdefault(module, set()).add(imported)

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in graph.get(start, ()):
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    assert sorted(module for module in graph if reaches(module, module, {module})) == []


# The layers below the HTTP one take the parts they use (``Services`` or fewer), never the
# aiohttp app or a request, and read no app key; the chat flow included (docs/ARCHITECTURE.md).
WITHOUT_APP = ("chat", "memory", "recall", "partition", "conversations", "search", "llm", "text",
               "db", "protocols")
WEB_OBJECTS = {"Application", "Request"}


def _web_objects(annotation: ast.expr) -> set[str]:
    """The aiohttp app or request an annotation names (also inside a quoted one)."""
    named = {part.attr if isinstance(part, ast.Attribute) else part.id
             for part in ast.walk(annotation) if isinstance(part, (ast.Attribute, ast.Name))}
    named |= {word for part in ast.walk(annotation)
              if isinstance(part, ast.Constant) and isinstance(part.value, str)
              for word in re.findall(r"\w+", part.value)}
    return named & WEB_OBJECTS


def app_uses(source: str) -> Iterator[tuple[str, int]]:
    """``(what, line)`` for each parameter or field annotated as an aiohttp app or request,
    and each lookup of an app key (``something[keys.NAME]``) in ``source``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args
            for argument in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                             arguments.vararg, arguments.kwarg):
                if argument is not None and argument.annotation is not None:
                    for name in sorted(_web_objects(argument.annotation)):
                        yield f"parameter {argument.arg}: {name}", node.lineno
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            for name in sorted(_web_objects(node.annotation)):
                yield f"field {node.target.id}: {name}", node.lineno
        elif isinstance(node, ast.Subscript):
            key = node.slice
            if isinstance(key, ast.Attribute) and isinstance(key.value, ast.Name) \
                    and key.value.id in ("keys", "dkeys"):
                yield f"app key {key.value.id}.{key.attr}", node.lineno


def test_the_app_reader_sees_parameters_quoted_annotations_and_app_keys() -> None:
    source = (
        "def prepare(app: web.Application, settings: Settings) -> None:\n"
        "    return app[keys.SERVICES]\n"
        "async def later(*, where: 'web.Request | None' = None) -> None: ...\n"
        "class StepContext:\n"
        "    app: web.Application\n"
        "def fine(services: Services, names: dict[str, int]) -> int:\n"
        "    return names['x']\n"
    )
    assert sorted(app_uses(source)) == [("app key keys.SERVICES", 2),
                                        ("field app: Application", 5),
                                        ("parameter app: Application", 1),
                                        ("parameter where: Request", 3)]


def test_the_chat_flow_and_the_services_take_no_app() -> None:
    found = []
    for module, path in our_modules(ROOT).items():
        if area(module) in WITHOUT_APP:
            found += [f"{module}:{line} {what}"
                      for what, line in app_uses(path.read_text(encoding="utf-8"))]
    assert found == []


# The floors of the house, top first (docs/ARCHITECTURE.md, "Layers"). A module belongs to the
# floor of its longest listed prefix; an import may point along its floor or down, never up.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("assembly", ("app", "services", "job_kinds")),
    ("http", ("routes", "dashboard", "mcp", "sub_apps", "middlewares", "cors", "auth",
              "open_gateway", "request_body", "request_statements", "errors", "app_faces",
              "relay", "protocols.anthropic.turn", "protocols.responses.turn")),
    ("protocols", ("protocols",)),
    ("chat pipeline", ("chat", "upgrade")),
    ("chat steps", ("partition", "chat.memory_step", "recall.inject")),
    ("conversation storage", ("conversations",)),
    ("memory and recall", ("memory", "recall", "usage_report", "job_admin",
                           "config_problems")),
    ("the steps' contract", ("chat.prepared", "chat.cache_control", "chat.persona")),
    ("search", ("search",)),
    ("resources", ("database", "jobs", "tasks", "live_settings", "replies_in_flight")),
    ("llm", ("llm",)),
    ("db", ("db",)),
    ("text", ("text", "priority_worker")),
    ("base", ("settings", "keys", "local_time", "api_error", "removed_settings",
              "data_folder", "proxies", "logs", "c_heap", "blas_threads", "slow_clients", "serving",
              "cancelling", "")),
)
# The one module allowed to name ``Services`` (and the app's own factory beside it).
ASSEMBLY = {"pawwake.app", "pawwake.services"}


def floor_of(module: str) -> int:
    """The index in ``LAYERS`` of the floor ``module`` stands on (0 is the top)."""
    relative = module.removeprefix(PACKAGE).removeprefix(".")
    best, best_length = -1, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (relative == prefix or relative.startswith(prefix + ".")
                    or (prefix == "" and relative == "")) and len(prefix) > best_length:
                best, best_length = index, len(prefix)
    return best


def upward_arrows(found: list[tuple[str, str, int]]) -> list[str]:
    return sorted(f"{module}:{line} imports {imported} ({LAYERS[floor_of(imported)][0]})"
                  for module, imported, line in found
                  if floor_of(imported) < floor_of(module))


def circles(found: list[tuple[str, str, int]]) -> list[list[str]]:
    """Every set of files that import each other round a circle (strongly connected, more than
    one file), each sorted, found by Tarjan's algorithm on the import graph."""
    graph: dict[str, set[str]] = {}
    for module, imported, _ in found:
        if module != imported:
            graph.setdefault(module, set()).add(imported)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    result: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                result.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(result)


def test_every_module_stands_on_a_floor() -> None:
    assert [module for module in our_modules(ROOT) if floor_of(module) < 0] == []


def test_the_floor_and_circle_readers_see_what_they_should() -> None:
    found = [("pawwake.db.jobs", "pawwake.memory.store", 3),
             ("pawwake.memory.store", "pawwake.db.jobs", 4),
             ("pawwake.routes.chat", "pawwake.chat.pipeline", 5),
             ("pawwake.chat.a", "pawwake.chat.b", 6), ("pawwake.chat.b", "pawwake.chat.c", 7),
             ("pawwake.chat.c", "pawwake.chat.a", 8)]
    assert floor_of("pawwake.protocols.responses.turn") < floor_of("pawwake.protocols.x")
    assert floor_of("pawwake") == floor_of("pawwake.settings") == len(LAYERS) - 1
    assert upward_arrows(found) == [
        "pawwake.db.jobs:3 imports pawwake.memory.store (memory and recall)"]
    assert circles(found) == [["pawwake.chat.a", "pawwake.chat.b", "pawwake.chat.c"],
                              ["pawwake.db.jobs", "pawwake.memory.store"]]


def test_no_import_points_up_a_floor() -> None:
    assert upward_arrows(edges()) == []


def test_no_circle_between_files() -> None:
    """Type-only imports count: a reader follows them as Python does not."""
    assert circles(edges()) == []


def services_named(source: str) -> Iterator[int]:
    """The line of each place ``source`` names the ``Services`` type in code: a name, an
    attribute, an import, or a word inside a quoted annotation."""
    tree = ast.parse(source)
    quoted: set[int] = set()
    for node in ast.walk(tree):
        annotations: list[ast.expr] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args
            annotations += [argument.annotation for argument in
                            (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                             arguments.vararg, arguments.kwarg)
                            if argument is not None and argument.annotation is not None]
            annotations += [node.returns] if node.returns is not None else []
        elif isinstance(node, ast.AnnAssign):
            annotations.append(node.annotation)
        elif isinstance(node, ast.Subscript):
            annotations.append(node.slice)
        for annotation in annotations:
            for part in ast.walk(annotation):
                if isinstance(part, ast.Constant) and isinstance(part.value, str) \
                        and "Services" in re.findall(r"\w+", part.value):
                    quoted.add(part.lineno)
    yield from sorted(quoted)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Name) and node.id == "Services") \
                or (isinstance(node, ast.Attribute) and node.attr == "Services"):
            yield node.lineno
        elif isinstance(node, ast.ImportFrom):
            yield from (node.lineno for alias in node.names if alias.name == "Services")


def test_the_services_reader_sees_names_imports_and_quoted_annotations() -> None:
    source = (
        "from pawwake.services import Services\n"
        "def run(services: 'Services', other: MemoryWrites) -> None: ...\n"
        "Tool = Callable[['Services', int], None]\n"
        "class StepContext:\n"
        "    services: services.Services\n"
        "'''Services in a docstring is only a word.'''\n"
    )
    assert sorted(services_named(source)) == [1, 2, 3, 5]


def test_services_whole_are_named_only_in_the_assembly() -> None:
    """Steps, jobs and routes declare the face they use; only the assembly sees them all."""
    found = [f"{module}:{line}" for module, path in our_modules(ROOT).items()
             if module not in ASSEMBLY
             for line in services_named(path.read_text(encoding="utf-8"))]
    assert found == []


# How a turn ends is decided in one place (docs/ARCHITECTURE.md, One chat request): the relay's
# ending starts the after-reply hooks; the pipeline only for a request it never forwarded.
TURN_ENDS = {"pawwake.relay.ending", "pawwake.chat.pipeline"}
AFTER_HOOKS = {"after_reply", "after_failure", "after_incomplete"}


def hook_calls(source: str) -> set[str]:
    """The after-reply hook runners ``source`` calls (by name or as an attribute)."""
    called = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            function = node.func
            name = function.attr if isinstance(function, ast.Attribute) else \
                function.id if isinstance(function, ast.Name) else ""
            called |= {name} & AFTER_HOOKS
    return called


def test_a_turn_ends_in_one_place() -> None:
    assert hook_calls("after_reply(tasks, p, r)\npipeline.after_failure(t, p, 'x')\n") == {
        "after_reply", "after_failure"}
    callers = {module for module, path in our_modules(ROOT).items()
               if hook_calls(path.read_text(encoding="utf-8"))}
    assert callers == TURN_ENDS

"""The shape of bob_acp/: imports run one way, down the layers, with no cycle (function-level
imports and lazily imported modules included); the transport imports nothing of Bob; no module
reads another's private names; a module's mutable state is one owner object, never loose globals;
mypy finds nothing."""

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "bob_acp"

# Top to bottom. A module may import its own layer and those below; never one above.
LAYERS = [
    ("entry points", ["bob_acp.__main__", "bob_acp.cli", "bob_acp.chat", "bob_acp.setup", "bob_acp.check"]),
    ("acp", ["bob_acp.acp"]),
    ("engine", ["bob_acp.engine"]),
    # The rooms, each a floor of its own: a room imports only those below it.
    ("mcp", ["bob_acp.mcp"]),
    ("providers", ["bob_acp.providers"]),
    ("checkpoints", ["bob_acp.checkpoints"]),
    ("sessions", ["bob_acp.sessions"]),
    ("rules", ["bob_acp.rules"]),
    ("context", ["bob_acp.context"]),
    ("tools", ["bob_acp.tools"]),
    ("sandbox", ["bob_acp.sandbox"]),
    ("config", ["bob_acp.config"]),
    ("processes", ["bob_acp.processes"]),
    ("leaves", ["bob_acp.context.history", "bob_acp.files", "bob_acp.cancel", "bob_acp.exceptions",
                "bob_acp.acp.lazy", "bob_acp.jsontext", "bob_acp.log", "bob_acp.secrets", "bob_acp.timestamps",
                "bob_acp.threads", "bob_acp"]),
    ("transport", ["bob_acp.jsonrpc"]),
]


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def layer(module: str) -> int:
    best, depth = None, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > depth:
                best, depth = index, len(prefix)
    assert best is not None, f"{module} is in no layer: add it to LAYERS"
    return best


def imports(known: dict[str, Path]) -> dict[str, set[str]]:
    """Every bob_acp module each module imports, at any depth of its code (a function's own
    imports too) and through LazyModule("…")."""
    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in known.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [f"{node.module}.{alias.name}" for alias in node.names]
            elif (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "LazyModule" and node.args
                  and isinstance(node.args[0], ast.Constant)):
                names = [node.args[0].value]
            for name in names:
                if name.startswith("bob_acp"):
                    target = resolve(name)
                    if target and target != module and not (module.startswith(target + ".") and target == "bob_acp"):
                        found.add(target)
        graph[module] = found
    return graph


def test_every_module_has_a_layer_and_imports_run_down():
    known = modules()
    upward = []
    for module, targets in imports(known).items():
        for target in targets:
            if target == "bob_acp" or module.startswith(target + "."):
                continue  # the package's own __init__ (its version), a package importing its parts
            if layer(target) < layer(module):
                upward.append(f"{module} ({LAYERS[layer(module)][0]}) imports {target} ({LAYERS[layer(target)][0]})")
    assert upward == []


def test_the_transport_imports_nothing_of_bob():
    graph = imports(modules())
    outside = {f"{m} -> {t}" for m, ts in graph.items() if m.startswith("bob_acp.jsonrpc")
               for t in ts if not t.startswith("bob_acp.jsonrpc")}
    assert outside == set()


def test_there_is_no_import_cycle():
    graph = imports(modules())
    for module, targets in graph.items():  # a package importing its own parts is no cycle
        graph[module] = {t for t in targets if not t.startswith(module + ".")}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in graph:
        if module not in index:
            visit(module)
    assert cycles == []


def test_no_module_reads_another_modules_private_names():
    """`from x import _name` or `x._name` on an imported module: a room borrowing another's insides."""
    known = modules()
    found = []
    for module, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bob_acp"):
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(f"{module}: from {node.module} import {alias.name}")
                    if f"{node.module}.{alias.name}" in known:
                        aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("bob_acp"):
                        aliases[alias.asname or alias.name] = alias.name
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and isinstance(node.value, ast.Name) and node.value.id in aliases):
                found.append(f"{module}: {node.value.id}.{node.attr}")
    assert found == []


# What makes a module-level value loose state: a container, a lock or a counter of its own.
_LOOSE_CALLS = {"set", "dict", "list", "Lock", "RLock", "Condition", "Event", "count", "deque", "defaultdict",
                "OrderedDict", "WeakSet", "WeakValueDictionary"}


def test_module_state_is_owned_by_one_object_never_loose_globals():
    """A `global` statement rebinding module state, or a lower-case module-level container, lock or
    counter: state a test would have to reset, and that no object owns. (UPPER_CASE tables are
    constants; one `global` is allowed: the transport's codec picks its JSON library once.)"""
    found = []
    for module, path in modules().items():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Global) and module != "bob_acp.jsonrpc.codec":
                found.append(f"{module}:{node.lineno}: global {', '.join(node.names)}")
        for node in tree.body:
            if isinstance(node, ast.AnnAssign):
                targets, value = [node.target], node.value
            elif isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            else:
                continue
            names = [t.id for t in targets if isinstance(t, ast.Name) and not t.id.isupper() and t.id != "__all__"]
            if not names or value is None:
                continue
            loose = isinstance(value, (ast.Set, ast.Dict, ast.List, ast.SetComp, ast.DictComp, ast.ListComp))
            if isinstance(value, ast.Call):
                called = value.func.attr if isinstance(value.func, ast.Attribute) else getattr(value.func, "id", "")
                loose = called in _LOOSE_CALLS
            if loose:
                found.append(f"{module}:{node.lineno}: {', '.join(names)}")
    assert found == []


def test_mypy_finds_nothing_in_bob_and_a_misspelt_config_key_in_a_caller(tmp_path):
    """mypy (installed with the test extras) checks bob_acp/ clean; the configuration is typed,
    so a caller's `cfg.model.nmae` is an error it names."""
    caller = tmp_path / "caller.py"
    caller.write_text("from bob_acp.config import Config\n\n\ndef name(cfg: Config) -> str:\n"
                      "    return cfg.model.nmae\n")
    proc = subprocess.run([sys.executable, "-m", "mypy", "bob_acp", str(caller)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "MYPY_CACHE_DIR": str(ROOT / ".mypy_cache")})
    errors = [line for line in proc.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1 and "caller.py" in errors[0] and '"ModelSettings" has no attribute "nmae"' in errors[0], \
        proc.stdout[-6000:] + proc.stderr[-2000:]

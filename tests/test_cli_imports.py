"""Import hygiene: the CLI entry points stay light (STYLE.md, 'What the models got wrong' #7)."""

import json
import subprocess
import sys

HEAVY = ["torch", "vllm", "deepspeed", "transformers", "peft", "textual"]


def _modules_after(code: str) -> set[str]:
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_import_package_is_light():
    loaded = _modules_after("import ragen_cli")
    assert not loaded & set(HEAVY)


def test_cli_help_imports_no_heavy_package():
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from ragen_cli.cli import app\n"
        "r = CliRunner().invoke(app, ['--help'])\n"
        "assert r.exit_code == 0, r.output\n"
    )
    loaded = _modules_after(code)
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_every_subcommand_help_is_light():
    code = (
        "from typer.testing import CliRunner\n"
        "from ragen_cli.cli import app\n"
        "for cmd in ['init', 'validate', 'train', 'export', 'eval', 'watch', 'inspect', 'models', 'doctor', 'envs']:\n"
        "    r = CliRunner().invoke(app, [cmd, '--help'])\n"
        "    assert r.exit_code == 0, (cmd, r.output)\n"
    )
    loaded = _modules_after(code)
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_ragen_help_answers_fast():
    """`ragen --help` costs well under a second of CPU. CPU time, not wall time: the bound must
    hold on a loaded shared machine too (importing torch alone costs ~2 s of CPU)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "ragen_cli.cli", "--help"], capture_output=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # measured here: 0.23 s for --help, 1.6 s for `import torch` alone. The bound guards against a
    # heavy import: 0.8 s is 3.4x the measured cost (room for a loaded machine's cache misses and
    # frequency drops, which stretch CPU time far less than wall time) and half of torch's import.
    assert cpu < 0.8, f"ragen --help used {cpu:.2f} s of CPU"


def _import_graph() -> dict[str, set[str]]:
    """ragen_cli module -> the ragen_cli modules it imports anywhere (module level or inside a
    function): every `import` and `from ... import` statement, relative ones resolved."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "src"
    files = {}
    for f in (root / "ragen_cli").rglob("*.py"):
        parts = f.relative_to(root).with_suffix("").parts
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, f in files.items():
        package = mod.split(".") if f.name == "__init__.py" else mod.split(".")[:-1]
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(package[: len(package) - node.level + 1] + [node.module or ""]).strip(".") \
                    if node.level else node.module or ""
                names = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            graph[mod] |= {n for n in names if n in files and n != mod}
    return graph


def test_no_module_imports_another_in_a_circle():
    graph = _import_graph()
    assert graph["ragen_cli.spec.checks"] >= {"ragen_cli.spec.sizes"}  # the walk sees real edges
    # depth-first search for a back edge; report the first circle found
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state and (found := visit(n)):
                return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            circle = visit(m)
            assert circle is None, " -> ".join(circle)


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph collapsed onto ragen_cli's packages and top-level modules
    (ragen_cli.train.loop -> "train", ragen_cli.api -> "api"); edges inside one package dropped."""
    def package(m: str) -> str:
        return (m.split(".") + ["__init__"])[1]

    out: dict[str, set[str]] = {package(m): set() for m in graph}
    for m, ns in graph.items():
        out[package(m)] |= {package(n) for n in ns} - {package(m)}
    return out


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of `graph` with more than one node, each sorted (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                out.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_circles_finds_each_cycle_once():
    # a <-> b, and b -> c -> d -> c: two circles; e alone is none
    graph = {"a": {"b"}, "b": {"a", "c"}, "c": {"d"}, "d": {"c"}, "e": set()}
    assert circles(graph) == [["a", "b"], ["c", "d"]]
    assert package_graph({"ragen_cli.train.loop": {"ragen_cli.train.stages", "ragen_cli.api"},
                          "ragen_cli.train.stages": set(), "ragen_cli.api": set()}) == {"train": {"api"}, "api": set()}


def test_no_package_imports_another_in_a_circle():
    """ragen_cli.<package> -> ragen_cli.<package>, module-level and function-level imports alike:
    the packages form layers (spec < compile, rollout < train < publish, api on top)."""
    packages = package_graph(_import_graph())
    assert {"compile", "rollout", "train", "eval", "api", "publish"} <= set(packages)  # the walk sees them
    assert "rollout" in packages["compile"] and "train" in packages["eval"]  # and real edges
    found = circles(packages)
    assert not found, "; ".join(" <-> ".join(c) for c in found)


def test_spec_never_imports_compile():
    # compile reads spec; validation (spec) must not need the compiler
    graph = _import_graph()
    bad = {(m, n) for m, ns in graph.items() if m.startswith("ragen_cli.spec") for n in ns
           if n.startswith("ragen_cli.compile")}
    assert not bad, sorted(bad)

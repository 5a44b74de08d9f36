"""The README and the docs index as a user reads them: the README's spec validates and its
commands exist, every docs page is reachable from docs/README.md, relative links resolve, and
the README and the health guide stay short."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragen_cli.cli import app

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, re.S)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return {slug(m) for m in re.findall(r"^#+ (.+)$", text, re.M)}


def test_readme_is_short_and_undated():
    text = README.read_text()
    assert len(text.splitlines()) <= 150
    assert not re.search(r"^#+ .*\d{4}-\d\d-\d\d", text, re.M), "no dated headings"
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text), "no dates: run logs belong in docs/experiments/"


def test_health_guide_is_short():
    assert len((DOCS / "health.md").read_text().splitlines()) <= 400


def test_readme_spec_validates(tmp_path, monkeypatch):
    [spec] = blocks(README.read_text(), "yaml")
    name = re.match(r"# (\S+\.yaml)\n", spec).group(1)
    (tmp_path / name).write_text(spec)
    monkeypatch.chdir(ROOT)  # its data path is relative to the repository root, as the README says
    result = CliRunner().invoke(app, ["validate", str(tmp_path / name)])
    assert result.exit_code == 0, result.output
    assert f"ragen train {name}" in README.read_text()


def test_readme_commands_exist():
    text = README.read_text()
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M))
    used = set(re.findall(r"\bmake ([\w-]+)", text))
    assert {"install", "train", "test"} <= used and used <= targets, used - targets
    commands = {c.name for c in app.registered_commands} | {g.name for g in app.registered_groups}
    said = set(re.findall(r"(?:^|`|bin/)ragen ([a-z]+)\b", text, re.M))  # as typed: in code, not prose
    assert said and said <= commands, said - commands


def test_docs_index_reaches_every_page():
    index = (DOCS / "README.md").read_text()
    linked = {(DOCS / target.split("#")[0]).resolve() for target in LINK.findall(index)}
    pages = set(DOCS.glob("*.md")) | set((DOCS / "experiments").glob("*.md"))
    missing = sorted(str(p.relative_to(ROOT)) for p in pages - {DOCS / "README.md"} if p.resolve() not in linked)
    assert not missing, f"not in docs/README.md: {missing}"
    experiments = (DOCS / "experiments" / "README.md").read_text()
    listed = {target.split("#")[0] for target in LINK.findall(experiments)}
    logs = {p.name for p in (DOCS / "experiments").glob("*.md")} - {"README.md"}
    assert logs <= listed, f"not in docs/experiments/README.md: {sorted(logs - listed)}"


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_relative_links_resolve(page: Path):
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        assert dest.exists(), f"{page.name}: {target} does not exist"
        if anchor and dest.suffix == ".md":
            assert anchor in anchors(dest), f"{page.name}: no heading #{anchor} in {dest.name}"


def test_the_data_adapters_option_tables_are_their_config_classes():
    """docs/envs.md's option tables of dataset, tools and agent are generated from the config
    dataclasses (envs/config_doc.py): every field, its default, its help; a stale block fails."""
    from ragen_cli.envs.config_doc import ADAPTERS, options_table, update

    text = (ROOT / "docs" / "envs.md").read_text(encoding="utf-8")
    assert text == update(text), "run: python scripts/gen_docs.py"
    for name in ADAPTERS:
        assert f"<!-- options: {name} -->" in text
    agent = options_table("agent")
    # inherited fields keep their base class's help; the agent's own come first in its class
    assert "| `path` | required | The data: a .jsonl" in agent and "| `entry` | required | Your agent" in agent
    assert "| `timeout_s` | `120.0` | Longest time one episode may run" in agent

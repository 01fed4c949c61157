"""What the docs say about the tree, checked against it: every module of specplay/ in docs/architecture.md's
table (in its folder's row, and no row naming a module that isn't there), every "the only X import" claim
true, the licence said the same way in LICENSE, pyproject.toml and the Space's front matter, and every
relative link in the docs pointing at a file that exists."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

from tests.unit.test_architecture import imports_of, modules

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "specplay"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "benchmarks").glob("*.md"))]
LIBRARIES = {"gradio": "gradio", "vllm": "vllm"}


def table_rows() -> dict[str, set[str]]:
    """Folder (relative to specplay/) -> the `module.py` names its row of the layer table gives."""
    rows = {}
    for line in ARCHITECTURE.read_text().splitlines():
        found = re.match(r"\|\s*\d+\s*\|\s*`specplay/([\w/]+)/`\s*\|(.*)\|\s*$", line)
        if found:
            rows[found.group(1)] = set(re.findall(r"`([\w]+\.py)`", found.group(2)))
    return rows


def package_modules() -> dict[str, set[str]]:
    """Folder (relative to specplay/) -> its modules, __init__ left out."""
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        folder = path.parent.relative_to(PACKAGE).as_posix()
        if path.name != "__init__.py" and folder != ".":
            found.setdefault(folder, set()).add(path.name)
    return found


def test_every_module_is_in_the_architecture_table():
    rows, tree = table_rows(), package_modules()
    missing = [f"specplay/{folder}/{name}" for folder, names in tree.items()
               for name in sorted(names - rows.get(folder, set()))]
    assert not missing, f"not in docs/architecture.md's table (its folder's row): {missing}"
    assert "specplay/__main__.py" in ARCHITECTURE.read_text()


def test_the_table_names_no_module_that_is_not_there():
    tree = package_modules()
    stale = [f"specplay/{folder}/{name}" for folder, names in table_rows().items()
             for name in sorted(names - tree.get(folder, set()))]
    assert not stale, f"docs/architecture.md names modules that don't exist: {stale}"


def importers(library: str) -> set[str]:
    """Paths (relative to specplay/, folders ending in /) of the modules that import `library`."""
    return {path.relative_to(PACKAGE).as_posix() for name, path in modules()
            if any(t == library or t.startswith(library + ".") for t in imports_of(path, name))}


def only_import_claims() -> list[tuple[str, str, str]]:
    """(doc, what it names, library) for each "`X` (… the only Gradio import" (or "`X/` and `Y/` (… the
    only Gradio imports") in the docs; two folders are named as "X/+Y/"."""
    claims = []
    for doc in DOCS:
        text = " ".join(doc.read_text().split())
        for where, also, library in re.findall(r"`(?:specplay/)?([\w/]+(?:\.py|/))`(?: and `(?:specplay/)?([\w/]+/)`)?"
                                               r"[^`|]{0,60}?the only (\w+) imports?", text):
            claims.append((doc.relative_to(ROOT).as_posix(), f"{where}+{also}" if also else where, library))
    return claims


def test_only_import_claims_are_true():
    claims = only_import_claims()
    assert any(lib.lower() == "gradio" for _, _, lib in claims)  # the README's claim is found at all
    wrong = []
    for doc, where, library in claims:
        users = importers(LIBRARIES[library.lower()])
        if where.endswith("/"):  # a folder (or two): every importer inside it
            folders = tuple(w.removeprefix("specplay/") for w in where.split("+"))
            outside = sorted(u for u in users if not u.startswith(folders))
            if outside:
                wrong.append(f"{doc}: {where} is the only {library} import, but {outside} import it too")
        else:
            holders = [u for u in users if u == where or u.endswith("/" + where)]
            others = sorted(users - set(holders))
            if not holders or others:
                wrong.append(f"{doc}: {where} is the only {library} import, but it's {sorted(users)}")
    assert not wrong, "\n".join(wrong)


def test_the_licence_is_said_one_way():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text
    front = yaml.safe_load((ROOT / "README.md").read_text().split("---\n")[1])
    assert front["license"] == project["license"].lower() and front["tags"]


def test_relative_links_in_the_docs_resolve():
    """A link into a moved file (docs/benchmarks.md's history, the scripts under benchmarks/) is caught here;
    anchors are not checked, files are."""
    broken = []
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
            path = target.split("#")[0]
            if not path or re.match(r"[a-z]+:", path):
                continue
            if not (doc.parent / path).exists():
                broken.append(f"{doc.relative_to(ROOT)}: {target}")
    assert not broken, "\n".join(broken)


def anchors_of(doc: Path) -> set[str]:
    """GitHub's anchors for a Markdown file's headings (fenced code left out): lower case, punctuation
    dropped, spaces to hyphens."""
    found, fenced = set(), False
    for line in doc.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            heading = line.lstrip("#").strip()
            found.add(re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-"))
    return found


def test_links_into_markdown_headings_resolve():
    broken = []
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
            path, _, anchor = target.partition("#")
            if not anchor or re.match(r"[a-z]+:", path):
                continue
            file = (doc.parent / path) if path else doc
            if file.suffix == ".md" and file.exists() and anchor not in anchors_of(file):
                broken.append(f"{doc.relative_to(ROOT)}: {target}")
    assert not broken, "\n".join(broken)


def quoted_sections() -> set[tuple[str, str]]:
    """(file, name) for each place that cites a section as `docs/benchmarks.md, "Name"`."""
    found = set()
    for path in [*DOCS, *PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.yaml"), *(ROOT / "tests").rglob("*.py"),
                 *(ROOT / "loadtest").rglob("*.py")]:
        if path == Path(__file__):
            continue
        lines = (line.strip().lstrip("#") for line in path.read_text().splitlines())  # comments joined
        text = " ".join(" ".join(lines).split())
        for name in re.findall(r"benchmarks\.md\)?,? [\"'](.+?)[\"']", text):
            found.add((path.relative_to(ROOT).as_posix(), name))
    return found


def test_sections_cited_by_name_are_in_benchmarks_md():
    """Code comments, presets and docs cite docs/benchmarks.md by a section's name: each name is findable
    there (the reference names the history section it summarises)."""
    cited = quoted_sections()
    assert any(name == "Fair on 2 cores" for _, name in cited)  # the pattern finds citations at all
    text = " ".join((ROOT / "docs" / "benchmarks.md").read_text().split())
    missing = sorted(f"{where}: {name!r}" for where, name in cited if name not in text)
    assert not missing, "\n".join(missing)


def exit_code_table() -> dict[str, set[int]]:
    """docs/cli.md's exit-code table: command -> the codes it gives (a cell other than "—", and the
    "other" column's `N:` codes)."""
    rows = {}
    text = (ROOT / "docs" / "cli.md").read_text().split("## Exit codes", 1)[1]
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or not cells[0].startswith("`"):
            continue
        codes = {code for code, cell in zip((0, 1, 2), cells[1:4]) if cell and cell != "—"}
        codes |= {int(n) for n in re.findall(r"(\d+):", cells[4])}
        for name in re.findall(r"`([\w-]+)`", cells[0]):
            rows[name] = codes
    return rows


def test_docs_cli_lists_every_command_with_the_exit_codes_its_help_gives():
    from specplay.cli import main as cli

    text = (ROOT / "docs" / "cli.md").read_text()
    table = exit_code_table()
    wrong = []
    for cmd in cli.subcommands():
        if f"specplay {cmd.name}" not in text:
            wrong.append(f"{cmd.name}: not in docs/cli.md's usage")
        said = {int(n) for n in re.findall(r"(?:^|, )(\d+) ", cmd.epilog.removeprefix("exit codes: "))}
        if table.get(cmd.name) != said:
            wrong.append(f"{cmd.name}: --help says exit codes {sorted(said)}, docs/cli.md {sorted(table.get(cmd.name, ()))}")
    assert not wrong, "\n".join(wrong)

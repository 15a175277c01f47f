"""Run every python and console block of README.md and docs/ (``nox -s docs-run``).

Blocks run as tools/docblocks.py describes: against memory, PostgreSQL or Redis as their
marker says, each in a fresh interpreter or shell in an empty folder with no ``PGQUE_*``
setting inherited. A block against a server runs twice, so one that leaves state behind that
breaks a second run fails. ``signature`` blocks are checked against the objects they name.
"""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from docblocks import ROOT, Block, blocks, commands, doc_files

import pgque.core
import pgque.sharding
from pgque.core import Transport

#: The URLs runnable blocks write; the tests substitute the test servers' URLs.
DOC_URLS = {
    "postgres": "postgresql://localhost/app",
    "redis": "redis://localhost:6379/0",
    "pgbouncer": "postgresql://localhost:6432/app",
    "redis-cluster": "redis+cluster://localhost:7000,localhost:7001,localhost:7002/",
    "redis-cluster-node": "redis://localhost:7000",
}

ALL = [block for path in doc_files() for block in blocks(path)]
RUNNABLE = [(block, backend) for block in ALL if block.runs for backend in block.backends]
SIGNATURES = [block for block in ALL if block.kind == "signature"]
FILES = [block for block in ALL if block.kind == "file"]


def _ids(block: Block) -> str:
    return f"{block.where} [{block.kind}]"


def _run_ids(case: tuple[Block, str]) -> str:
    return f"{case[0].where} [{case[1]}]"


def test_every_python_and_console_block_is_accounted_for() -> None:
    """Each python/console block runs, is checked, or is marked install/nox/fragment."""
    languages = {block.language for block in ALL if block.kind != "fragment"}
    # Shell snippets are console blocks ("$ command"), so that they run.
    assert not languages & {"bash", "sh", "shell"}, [b.where for b in ALL if b.language == "bash"]
    fragments = [b for b in ALL if b.kind == "fragment"]
    assert len(fragments) <= 5, [b.where for b in fragments]  # rare: each one is a debt
    unmarked = [b.where for b in ALL if b.language in {"", "pycon"}]
    assert not unmarked, f"give these blocks a language: {unmarked}"


@pytest.fixture(scope="session")
def server_urls() -> dict[str, str]:
    """Return the test servers: PGQUE_TEST_* when set, else throwaway ones (and a PgBouncer in
    front of the PostgreSQL server for ``pgbouncer`` blocks)."""
    from pgque.conformance.servers.pgbouncer import shared_pgbouncer
    from pgque.conformance.servers.postgres import postgres_url
    from pgque.conformance.servers.redis import redis_url

    urls: dict[str, str] = {}
    needed = {backend for _, backend in RUNNABLE}
    if needed & {"postgres", "pgbouncer"}:
        urls["postgres"] = postgres_url()
    if "pgbouncer" in needed:
        urls["pgbouncer"] = shared_pgbouncer(urls["postgres"]).url
    if "redis" in needed:
        urls["redis"] = redis_url()
    if "redis-cluster" in needed:
        from pgque.conformance.servers.redis_cluster import shared_cluster

        cluster = shared_cluster()
        urls["redis-cluster"] = cluster.url
        urls["redis-cluster-node"] = cluster.seed_url
    return urls


_MEMORY_URL = re.compile(r"memory://[A-Za-z0-9_-]*(\?)?")


def _substitute(code: str, urls: dict[str, str], backend: str) -> str:
    if backend != "memory":
        real = urls[backend]
        joiner = "&" if "?" in real else "?"
        code = _MEMORY_URL.sub(lambda m: real + (joiner if m.group(1) else ""), code)
    for kind, doc_url in DOC_URLS.items():
        if kind not in urls:
            continue
        real = urls[kind]
        joiner = "&" if "?" in real else "?"
        code = code.replace(doc_url + "?", real + joiner).replace(doc_url, real)
    return code


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGQUE_")}
    # The session's environment first: `python` and `pgque` are the ones pgque is installed in.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PYTHONPATH", None)
    return env


def _run(
    block: Block, backend: str, folder: Path, urls: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    for module in FILES:
        if module.path == block.path:
            target = folder / module.words[1]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(module.code, encoding="utf-8")
    code = _substitute(block.code, urls, backend)
    if block.language == "python":
        script = folder / "test_block.py"
        script.write_text(code, encoding="utf-8")
        argv = [sys.executable, str(script)]
        if "pytest" in block.words:
            argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(script)]
    else:
        lines = commands(Block(block.path, block.line, block.language, code, block.words))
        body = "\n".join([*(f"{line} || exit 99" for line in lines[:-1]), lines[-1]])
        argv = ["bash", "-c", "set -o pipefail\n" + body]
    return subprocess.run(
        argv,
        cwd=folder,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


@pytest.mark.parametrize("case", RUNNABLE, ids=_run_ids)
def test_block_runs(case: tuple[Block, str], tmp_path: Path, server_urls: dict[str, str]) -> None:
    block, backend = case
    runs = 2 if backend in {"postgres", "redis", "pgbouncer", "redis-cluster"} else 1
    for attempt in range(1, runs + 1):
        folder = tmp_path / f"run{attempt}"
        folder.mkdir()
        result = _run(block, backend, folder, server_urls)
        assert result.returncode == block.expected_exit, (
            f"{block.where} on {backend} (run {attempt}) exited {result.returncode}, expected "
            f"{block.expected_exit}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
        )


@pytest.mark.parametrize("block", FILES, ids=_ids)
def test_module_blocks_compile(block: Block) -> None:
    assert len(block.words) == 2, block.words
    assert block.words[1].endswith(".py"), block.words
    compile(block.code, block.where, "exec")


_CALL = re.compile(r"^(?P<name>[A-Za-z_]\w*)\((?P<params>.*)\)(?:\s*->\s*.+)?$")
_CLASS = re.compile(r"^class (?P<name>\w+)")


def _lookup(name: str) -> object:
    if hasattr(pgque.core, name):
        return getattr(pgque.core, name)
    if hasattr(pgque.sharding, name):  # docs/scaling.md
        return getattr(pgque.sharding, name)
    if hasattr(Transport, name):
        return getattr(Transport, name)
    if hasattr(pgque.core.InMemoryTransport, name):  # queues(), purge(): not in the protocol
        return getattr(pgque.core.InMemoryTransport, name)
    raise AssertionError(
        f"{name} is neither in pgque.core (or pgque.sharding) nor a transport method"
    )


def _documented_parameters(params: str) -> list[str]:
    names = []
    depth = 0
    current = ""
    for char in params:
        depth += char in "([{"
        depth -= char in ")]}"
        if char == "," and depth == 0:
            names.append(current)
            current = ""
        else:
            current += char
    names.append(current)
    out = []
    for part in (p.strip() for p in names):
        if not part or part in {"*", "/", "..."}:
            continue
        out.append(re.split(r"[:=]", part.lstrip("*"), maxsplit=1)[0].strip())
    return out


def _joined(block: Block) -> list[str]:
    """Return the block's lines, a call that spans lines joined into one."""
    out: list[str] = []
    for line in block.code.splitlines():
        text = line.split("  #", 1)[0].rstrip()
        if out and out[-1].count("(") > out[-1].count(")"):
            out[-1] += " " + text.strip()
        elif text.strip():
            out.append(text.strip())
    return out


@pytest.mark.parametrize("block", SIGNATURES, ids=_ids)
def test_signature_matches_the_code(block: Block) -> None:
    checked = 0
    for line in _joined(block):
        if line.startswith("@"):
            continue
        heading = _CLASS.match(line)
        if heading:
            assert inspect.isclass(_lookup(heading.group("name"))), line
            checked += 1
            continue
        call = _CALL.match(line)
        if call is None:
            continue  # a field of a class body: the class itself was checked
        target = _lookup(call.group("name"))
        if call.group("params").strip() == "...":  # "same arguments as above": name only
            checked += 1
            continue
        documented = _documented_parameters(call.group("params"))
        if documented == []:
            real = [p for p in inspect.signature(target).parameters if p != "self"]  # type: ignore[arg-type]
            assert real == [], f"{block.where}: {line} leaves out {real}"
        else:
            real = [p for p in inspect.signature(target).parameters if p != "self"]  # type: ignore[arg-type]
            assert documented == real, (
                f"{block.where}: {line} documents {documented}, code has {real}"
            )
        checked += 1
    assert checked, f"{block.where}: no signature found"


def test_every_contract_member_is_in_the_reference() -> None:
    """docs/reference.md documents every member of the Transport protocol: a method under a
    ``### name`` heading (``close`` under "close and context managers") with a signature block,
    a property in the Properties list."""
    page = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    headings = set(re.findall(r"^### (\w+)", page, flags=re.MULTILINE))
    properties = set(re.findall(r"^`(\w+) -> ", page, flags=re.MULTILINE))
    signed = {
        match.group("name")
        for block in SIGNATURES
        if block.path.name == "reference.md"
        for line in _joined(block)
        if (match := _CALL.match(line))
    }
    members = {name for name in vars(Transport) if not name.startswith("_")}
    missing = sorted(
        name
        for name in members
        if not (name in properties or (name in headings and name in signed))
    )
    assert not missing, f"docs/reference.md does not document {missing}"


def test_the_cli_reference_page_matches_the_click_app() -> None:
    from cli_reference import render

    page = ROOT / "docs" / "cli-reference.md"
    assert page.read_text(encoding="utf-8") == render(), (
        "docs/cli-reference.md is out of date: run `python tools/cli_reference.py`"
    )


def test_schema_versions_in_the_docs_are_the_current_one() -> None:
    """Output shown in the docs names the schema version `pgque install` prints today."""
    numbers = [int(p.name[:4]) for p in (ROOT / "shared-sql" / "migrations").glob("[0-9]*.sql")]
    current = max(numbers)
    shown = [
        (block.where, int(number))
        for block in ALL
        if block.language == "console"
        for number in re.findall(r"(?:\(version|at version) (\d+)", block.code)
    ]
    assert shown, "no schema version shown in the docs any more: drop this test"
    assert all(version == current for _, version in shown), (current, shown)

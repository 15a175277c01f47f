"""Smoke-test built wheels in a fresh environment; ``nox -s build`` runs it.

Run it with the interpreter of a virtual environment where every built pgque wheel and the PyPI
distribution ``pgque-py`` are installed (not editable). It checks that:

- every installed ``pgque-*`` distribution ships only its own ``pgque/<name>/`` subpackage (no
  ``pgque/__init__.py``: ``pgque.*`` is a PEP 420 namespace), ``py.typed``, declares
  ``Requires-Python >=3.10``, and pins its siblings exactly;
- no two distributions, ``pgque-py`` included, install the same file;
- each ``pgque.<name>`` imports from the environment (not from the source tree), and every entry
  point of every ``pgque-*`` distribution loads; a ``pgque.transports`` entry point is a
  ``Backend`` naming its own distribution, and each URL scheme of an installed backend has the
  opener its distribution promises; each backend registers a partition adapter
  (``pgque.partition_adapters``) for each of its transport classes, pgque-postgres the
  ``install`` and ``migrate`` commands (``pgque.cli_commands``), pgque-dashboard the
  ``dashboard`` and ``metrics`` commands and the worker's ``prometheus`` exporter
  (``pgque.worker_exporters``), and pgque-partition ships no backend's Lua or SQL;
- ``memory://`` publishes, claims and acks, blocking and asyncio;
- each wheel carries every file of its source package (Lua scripts, SQL, ``py.typed``...), and
  the Postgres wheels carry every ``shared-sql/**/*.sql`` file as package data, byte for byte,
  and assemble their fresh-install script from their own copy of ``shared-sql/schema/``;
- ``import pgque`` is still pgque-py's package, in the same interpreter and in fresh ones.

Exits with status 1 and a list of failures if any check fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from functools import partial
from importlib import metadata, resources
from importlib.abc import Traversable
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parent.parent
SHARED_SQL = ROOT / "shared-sql"
PGQUE_PY = "pgque-py"
#: Distributions whose wheels must carry the shared SQL files, and the package holding them.
SQL_CARRIERS = {"pgque-postgres": "pgque.postgres", "pgque-postgres-async": "pgque.postgres_async"}

_failures: list[str] = []
_passed = 0


def check(condition: bool, what: str) -> bool:
    """Record the result of one check and print it; return *condition*."""
    global _passed
    if condition:
        _passed += 1
        print(f"  ok    {what}")
    else:
        _failures.append(what)
        print(f"  FAIL  {what}")
    return condition


def attempt(what: str, action: Callable[[], object]) -> bool:
    """Run *action* as one check: it passes unless it raises."""
    try:
        action()
    except Exception as exc:
        return check(False, f"{what}: {type(exc).__name__}: {exc}")
    return check(True, what)


def normalise(name: str) -> str:
    """Return a distribution name in its canonical (PEP 503) form."""
    return re.sub(r"[-_.]+", "-", name).lower()


def our_distributions() -> dict[str, metadata.Distribution]:
    """Return the installed pgque distributions (``pgque-*`` but not pgque-py) by name."""
    found: dict[str, metadata.Distribution] = {}
    for dist in metadata.distributions():
        name = normalise(dist.metadata["Name"] or "")
        if name.startswith("pgque-") and name != PGQUE_PY:
            found[name] = dist
    return dict(sorted(found.items()))


def installed_files(dist: metadata.Distribution) -> list[PurePosixPath]:
    """Return the files *dist* installed, without its metadata and bytecode caches."""
    out: list[PurePosixPath] = []
    for file in dist.files or []:
        path = PurePosixPath(str(file))
        if path.parts and path.parts[0].endswith(".dist-info"):
            continue
        if "__pycache__" in path.parts or path.suffix == ".pyc":
            continue
        out.append(path)
    return out


def subpackages(dist: metadata.Distribution) -> list[str]:
    """Return the ``pgque.<name>`` packages *dist* ships (from its ``__init__.py`` files)."""
    names = {
        f"pgque.{path.parts[1]}"
        for path in installed_files(dist)
        if len(path.parts) == 3 and path.parts[0] == "pgque" and path.name == "__init__.py"
    }
    return sorted(names)


def check_layout(dists: dict[str, metadata.Distribution]) -> None:
    """Check namespace layout, typing marker, exact sibling pins and file ownership."""
    print("layout")
    owners: dict[PurePosixPath, str] = {}
    everyone = dict(dists)
    with contextlib.suppress(metadata.PackageNotFoundError):
        everyone[PGQUE_PY] = metadata.distribution(PGQUE_PY)
    clashes: list[str] = []
    for name, dist in everyone.items():
        for path in installed_files(dist):
            if path in owners:
                clashes.append(f"{path} ({owners[path]} and {name})")
            owners[path] = name
    check(
        not clashes,
        "no file is installed by two distributions"
        + "".join(f"\n          {clash}" for clash in clashes),
    )
    for name, dist in dists.items():
        files = installed_files(dist)
        check(
            PurePosixPath("pgque/__init__.py") not in files,
            f"{name} ships no pgque/__init__.py",
        )
        requires_python = dist.metadata["Requires-Python"] or ""
        check(requires_python == ">=3.10", f"{name} requires Python >=3.10 ({requires_python!r})")
        packages = subpackages(dist)
        check(bool(packages), f"{name} ships a pgque.* package: {', '.join(packages)}")
        for package in packages:
            marker = PurePosixPath(*package.split("."), "py.typed")
            check(marker in files, f"{name} ships {marker}")
        for requirement in dist.requires or []:
            match = re.match(r"^\s*([A-Za-z0-9_.-]+)\s*(.*?)\s*(;.*)?$", requirement)
            if match is None or match.group(3):
                continue
            sibling = normalise(match.group(1))
            if sibling in dists:
                version = dists[sibling].version
                check(
                    match.group(2).replace(" ", "") == f"=={version}",
                    f"{name} pins {sibling}=={version} (has {match.group(2) or 'no pin'!r})",
                )


def check_imports(dists: dict[str, metadata.Distribution]) -> None:
    """Import every ``pgque.<name>`` package from the environment, not the source tree."""
    print("imports")
    for name, dist in dists.items():
        for package in subpackages(dist):

            def load(package: str = package) -> None:
                module = importlib.import_module(package)
                where = Path(module.__file__ or "").resolve()
                sources = (ROOT / "packages", ROOT / "conformance-tests")
                if any(where.is_relative_to(tree) for tree in sources):
                    raise ImportError(f"imported from the source tree: {where}")

            attempt(f"import {package} ({name})", load)


def check_entry_points(dists: dict[str, metadata.Distribution]) -> None:
    """Load every entry point of every pgque distribution; check transport backends."""
    from pgque.core.registry import ENTRY_POINT_GROUP, KNOWN_SCHEMES, Backend

    print("entry points")
    served: dict[tuple[str, int], str] = {}
    for name, dist in dists.items():
        for ep in dist.entry_points:
            try:
                value = ep.load()
            except Exception as exc:
                check(False, f"{name}: {ep.group} {ep.name} = {ep.value} loads: {exc!r}")
                continue
            check(True, f"{name}: {ep.group} {ep.name} = {ep.value} loads")
            if ep.group != ENTRY_POINT_GROUP:
                continue
            if not check(isinstance(value, Backend), f"{ep.value} is a pgque.core.Backend"):
                continue
            assert isinstance(value, Backend)
            check(value.package == name, f"{ep.value} names its distribution {name!r}")
            if value.open is not None:
                served[(ep.name, 0)] = name
            if value.open_async is not None:
                served[(ep.name, 1)] = name
    for scheme, providers in KNOWN_SCHEMES.items():
        for flavour, provider in enumerate(providers):
            if provider in dists:
                kind = ("a blocking", "an asyncio")[flavour]
                check(
                    served.get((scheme, flavour)) == provider,
                    f"{scheme}:// has {kind} transport from {provider}",
                )
    check_partition_adapters(dists)
    check_cli_commands(dists)


#: The transport classes each distribution's partition adapters serve (pgque.partition_adapters).
PARTITION_ADAPTERS = {
    "pgque-core": {
        "pgque.core.memory.InMemoryTransport",
        "pgque.core.memory.AsyncInMemoryTransport",
    },
    "pgque-postgres": {"pgque.postgres.PostgresTransport"},
    "pgque-postgres-async": {"pgque.postgres_async.AsyncPostgresTransport"},
    "pgque-redis": {"pgque.redis.RedisTransport", "pgque.redis.AsyncRedisTransport"},
}

#: The ``pgque`` commands each distribution contributes (``pgque.cli_commands``).
CLI_COMMANDS = {
    "pgque-postgres": {"install", "migrate"},
    "pgque-dashboard": {"dashboard", "metrics"},
}

#: The worker's metrics exporters each distribution registers (``pgque.worker_exporters``).
WORKER_EXPORTERS = {"pgque-dashboard": {"prometheus"}}


def check_partition_adapters(dists: dict[str, metadata.Distribution]) -> None:
    """Check each backend registers an adapter for each of its transport classes, named after
    a class that exists, and that pgque-partition ships no backend's SQL or Lua."""
    from pgque.core.partition_base import ENTRY_POINT_GROUP

    for name, dist in dists.items():
        entries = [ep for ep in dist.entry_points if ep.group == ENTRY_POINT_GROUP]
        check(
            {ep.name for ep in entries} == PARTITION_ADAPTERS.get(name, set()),
            f"{name} registers partition adapters for {sorted(PARTITION_ADAPTERS.get(name, []))}",
        )
        for ep in entries:

            def served(ep: metadata.EntryPoint = ep) -> None:
                module, _, attribute = ep.name.rpartition(".")
                cls = getattr(importlib.import_module(module), attribute)
                adapter = ep.load()
                if not isinstance(cls, type):
                    raise TypeError(f"{ep.name} is not a class")
                if not (isinstance(adapter, type) and _is_adapter(adapter)):
                    raise TypeError(f"{ep.value} is not a partition adapter class")

            attempt(f"{name}: {ep.name} names a transport class, {ep.value} an adapter", served)
    if "pgque-partition" in dists:
        data = [
            str(path)
            for path in installed_files(dists["pgque-partition"])
            if path.suffix in {".lua", ".sql"}
        ]
        check(not data, f"pgque-partition ships no backend's Lua or SQL ({data or 'none'})")


def _is_adapter(cls: type) -> bool:
    from pgque.core.partition_base import AsyncPartitionAdapterBase, PartitionAdapterBase

    return issubclass(cls, (PartitionAdapterBase, AsyncPartitionAdapterBase))


def check_cli_commands(dists: dict[str, metadata.Distribution]) -> None:
    """Check the ``pgque`` commands each distribution contributes load (as factories, not
    called: click is installed here only as a dependency of pgque-dashboard), and the worker's
    metrics exporters."""
    for group, wanted, what in (
        ("pgque.cli_commands", CLI_COMMANDS, "the commands"),
        ("pgque.worker_exporters", WORKER_EXPORTERS, "the worker exporters"),
    ):
        for name, dist in dists.items():
            entries = [ep for ep in dist.entry_points if ep.group == group]
            check(
                {ep.name for ep in entries} == wanted.get(name, set()),
                f"{name} contributes {what} {sorted(wanted.get(name, []))}",
            )
            for ep in entries:
                attempt(
                    f"{name}: {ep.group} {ep.name} = {ep.value} is callable", partial(_callable, ep)
                )


def _callable(ep: metadata.EntryPoint) -> None:
    if not callable(ep.load()):
        raise TypeError(f"{ep.value} is not callable")


def check_memory() -> None:
    """Publish, claim and ack on ``memory://``, blocking and asyncio."""
    from pgque.core import Event, connect, connect_async

    print("memory://")

    def blocking() -> None:
        with connect("memory://?queue=smoke") as queue:
            ids = queue.publish_many([("g1", Event(kind="a")), ("g2", Event(kind="b"))])
            queue.publish("g1", Event(kind="c", data={"n": 1}))
            leases = queue.claim_many(5)
            if [lease.message_id for lease in leases] != ids:
                raise AssertionError(f"claimed {leases!r}, expected ids {ids}")
            if queue.ack_many(leases) != [True, True]:
                raise AssertionError("ack_many failed")
            lease = queue.claim()
            if lease is None or lease.event.data != {"n": 1} or not queue.ack(lease):
                raise AssertionError(f"unexpected lease {lease!r}")
            stats = queue.stats()
            if stats.messages != 0 or stats.groups != 0:
                raise AssertionError(f"queue not empty: {stats!r}")

    async def asynchronous() -> None:
        async with connect_async("memory://") as queue:
            await queue.publish("g", Event(kind="x"))
            lease = await queue.claim()
            if lease is None or not await queue.ack(lease) or await queue.claim() is not None:
                raise AssertionError(f"unexpected lease {lease!r}")

    attempt("blocking publish / claim / ack", blocking)
    attempt("asyncio publish / claim / ack", lambda: asyncio.run(asynchronous()))


def walk(node: Traversable, prefix: str = "") -> Iterator[tuple[str, Traversable]]:
    """Yield (relative posix path, file) for every file below *node*."""
    for child in node.iterdir():
        path = f"{prefix}{child.name}"
        if child.is_dir():
            if child.name != "__pycache__":
                yield from walk(child, f"{path}/")
        elif child.is_file():
            yield path, child


def check_package_data(dists: dict[str, metadata.Distribution]) -> None:
    """Check each wheel carries every file of its source package (Lua, SQL, py.typed...)."""
    print("package data")
    for name, dist in dists.items():
        for package in subpackages(dist):
            sub = package.split(".")[1]
            sources = [
                tree
                for tree in (ROOT / "conformance-tests", *ROOT.glob("packages/*"))
                if (tree / "pyproject.toml").is_file() and (tree / "src" / "pgque" / sub).is_dir()
            ]
            if len(sources) != 1:
                check(False, f"{package} has exactly one source tree (found {len(sources)})")
                continue
            source = sources[0] / "src" / "pgque" / sub
            expected = {
                path.relative_to(source).as_posix()
                for path in source.rglob("*")
                if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
            }
            carried = {path for path, _file in walk(resources.files(package))}
            missing = sorted(expected - carried)
            check(
                not missing,
                f"{name} carries all {len(expected)} files of {package}"
                + (f"; missing {missing}" if missing else ""),
            )


def check_sql(dists: dict[str, metadata.Distribution]) -> None:
    """Check the Postgres wheels carry every shared SQL file, identical to shared-sql/."""
    wanted = {
        path.relative_to(SHARED_SQL).as_posix(): path.read_bytes()
        for path in sorted(SHARED_SQL.rglob("*.sql"))
    }
    for name, package in SQL_CARRIERS.items():
        if name not in dists:
            continue
        print(f"shared SQL in {name}")
        carried = {
            path: f.read_bytes()
            for path, f in walk(resources.files(package))
            if path.endswith(".sql")
        }
        check(bool(carried), f"{package} carries .sql package data ({len(carried)} files)")
        check(bool(wanted), f"{SHARED_SQL} has .sql files to compare against ({len(wanted)})")
        for relative, text in wanted.items():
            # The wheel may nest the files (e.g. pgque/postgres/sql/...); match on the tail.
            copies = [
                body
                for path, body in carried.items()
                if path == relative or path.endswith(f"/{relative}")
            ]
            check(
                len(copies) == 1 and copies[0] == text,
                f"{package} carries shared-sql/{relative} unchanged",
            )

        def assembled(package: str = package) -> None:
            # The fresh-install script comes from the wheel's copy, every schema/ file in order.
            sql = importlib.import_module(f"{package}._sql")
            names = [name for name, _text in sql.schema_files()]
            shipped = sorted(p.name for p in (SHARED_SQL / "schema").glob("[0-9][0-9]_*.sql"))
            if names != shipped:
                raise AssertionError(f"assembled {names}, shared-sql/schema/ has {shipped}")
            if ROOT in Path(str(sql.sql_files())).resolve().parents:
                raise AssertionError(f"{package} reads the SQL of the checkout, not its own")

        attempt(f"{package} assembles its fresh-install script from its own schema/", assembled)


def check_pgque_py() -> None:
    """Check pgque-py's ``import pgque`` works beside the namespace packages."""
    print("beside pgque-py")
    try:
        dist = metadata.distribution(PGQUE_PY)
    except metadata.PackageNotFoundError:
        check(False, f"{PGQUE_PY} is installed")
        return
    check(True, f"{PGQUE_PY} {dist.version} is installed")

    def same_interpreter() -> None:
        import pgque

        where = Path(pgque.__file__ or "").resolve()
        owned = {(Path(str(dist.locate_file(f)))).resolve() for f in dist.files or []}
        if where not in owned:
            raise ImportError(f"import pgque gave {where}, not pgque-py's package")
        if not callable(getattr(pgque, "connect", None)) or not hasattr(pgque, "PgqueClient"):
            raise ImportError("pgque-py's pgque lacks connect / PgqueClient")
        if sys.modules["pgque.core"].__name__ != "pgque.core":
            raise ImportError("pgque.core vanished")

    attempt("import pgque is pgque-py's package, pgque.core still loaded", same_interpreter)

    def one_directory() -> None:
        import pgque

        home = [Path(p).resolve() for p in pgque.__path__]
        for name in sorted(sys.modules):
            if name.count(".") == 1 and name.startswith("pgque."):
                module = sys.modules[name]
                where = Path(module.__file__ or "").resolve().parent
                # pgque-py's regular package searches only its own directory for subpackages.
                if where.parent not in home and where not in home:
                    raise ImportError(f"{name} lives in {where}, outside pgque.__path__ {home}")

    attempt("every pgque.* subpackage lives in pgque-py's pgque/ directory", one_directory)
    orders = {
        "pgque first": "import pgque, pgque.core; pgque.PgqueClient; pgque.core.Event(kind='k')",
        "pgque.core first": (
            "import pgque.core, pgque; pgque.core.connect('memory://'); pgque.connect"
        ),
    }
    for label, code in orders.items():

        def fresh(code: str = code) -> None:
            result = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=False
            )
            if result.returncode:
                raise ImportError(result.stderr.strip().splitlines()[-1])

        attempt(f"fresh interpreter, {label}", fresh)


def main() -> int:
    """Run every check; return the exit status."""
    print(f"smoke test with {sys.executable} (Python {sys.version.split()[0]})")
    dists = our_distributions()
    print(f"distributions: {', '.join(f'{n} {d.version}' for n, d in dists.items()) or 'none'}")
    if not check("pgque-core" in dists, "pgque-core is installed"):
        return 1
    check_layout(dists)
    check_imports(dists)
    check_entry_points(dists)
    check_memory()
    check_package_data(dists)
    check_sql(dists)
    check_pgque_py()
    if _failures:
        print(f"smoke: {len(_failures)} FAILED, {_passed} passed:")
        for failure in _failures:
            print(f"  - {failure}")
        return 1
    print(f"smoke: all {_passed} checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

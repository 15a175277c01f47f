"""The dashboard without pgque-postgres-async: it reads PostgreSQL through the blocking
transport (pgque-postgres) in threads, every page working, in a subprocess where that
distribution is made absent (``_no_async_postgres.py`` as its ``sitecustomize``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

from pgque.core import Event, SupportsPurge, connect

_HERE = Path(__file__).parent

_SCRIPT = """
import json, re, sys
from starlette.testclient import TestClient
from pgque.core import connect_async
from pgque.dashboard import create_app

url, queue = sys.argv[1], sys.argv[2]
try:
    connect_async(url)
except Exception as exc:
    missing = str(exc)
else:
    missing = None
seen = {"connect_async": missing}
with TestClient(create_app(url, allow_actions=True), base_url="http://127.0.0.1") as c:
    api = c.get("/api/queues")
    seen["api"] = [api.status_code, [q["queue"] for q in api.json().get("queues", [])]]
    for path in ("/", "/groups", "/groups/tenant%2F1", "/dead-letters", "/scheduled",
                 "/schedules"):
        full = path if path == "/" else f"/queues/{queue}{path}"
        seen[path] = c.get(full).status_code
    page = c.get(f"/queues/{queue}/groups/tenant%2F1").text
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    csrf = found.group(1) if found else "no form on the page"
    done = c.post(f"/queues/{queue}/actions/retry-now",
                  data={"group": "tenant/1", "csrf": csrf}, follow_redirects=False)
    seen["retry-now"] = [done.status_code, done.headers.get("location", "")]
print(json.dumps(seen))
"""


def test_without_the_asyncio_postgres_package_every_page_works(
    postgres_url: str, tmp_path: Path
) -> None:
    shutil.copy(_HERE / "_no_async_postgres.py", tmp_path / "sitecustomize.py")
    queue = f"dash-{uuid.uuid4().hex[:10]}"
    with connect(postgres_url, queue=queue, max_attempts=5) as t:
        t.publish("tenant/1", Event(kind="charge"))
        t.publish("later", Event(kind="k"), delay=3600)
        lease = t.claim()
        assert lease is not None
        assert t.nack(lease, delay=3600, error="card declined")
        try:
            env = {**os.environ, "PYTHONPATH": str(tmp_path)}
            result = subprocess.run(
                [sys.executable, "-c", _SCRIPT, postgres_url, queue],
                capture_output=True,
                text=True,
                env=env,
                timeout=120,
                check=False,
            )
            assert result.returncode == 0, result.stderr
            seen = json.loads(result.stdout.strip().splitlines()[-1])
            # The subprocess really lacks the asyncio transport...
            assert "pip install" in seen["connect_async"]
            assert "pgque-postgres-async" in seen["connect_async"]
            # ...and the dashboard serves every page all the same.
            status, queues = seen["api"]
            assert status == 200
            assert queue in queues
            for path in ("/", "/groups", "/groups/tenant%2F1", "/dead-letters", "/scheduled"):
                assert seen[path] == 200, (path, seen)
            assert seen["/schedules"] == 200
            assert seen["retry-now"] == [303, f"/queues/{queue}/groups/tenant%2F1?done=retry-now"]
            info = t.group("tenant/1")
            assert info is not None
            assert info.state == "ready"
        finally:
            assert isinstance(t, SupportsPurge)
            t.purge()

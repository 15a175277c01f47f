"""Throwaway TLS servers with password authentication, for the TLS and secrets tests.

:func:`self_signed` makes a certificate for ``127.0.0.1``/``localhost`` with ``openssl``.
:class:`TlsPostgres` runs a private PostgreSQL cluster (``initdb`` + ``pg_ctl`` from
``PGQUE_TEST_PG_BIN``, the ``PATH`` or ``/usr/lib/postgresql/*/bin``) on a free port of
127.0.0.1 that accepts only TLS connections with a password (``hostssl ... scram-sha-256``,
``hostnossl ... reject``). :class:`TlsRedis` runs ``redis-server`` (``PGQUE_TEST_REDIS_SERVER``,
``/usr/bin/redis-server`` or the ``PATH``) with only a TLS port and ``requirepass``. Both live in
a temporary folder removed on :meth:`stop`; neither touches any other server. A missing tool or
a build without TLS raises :class:`Unavailable` (tests skip on it).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Unavailable", "Certificate", "self_signed", "TlsPostgres", "TlsRedis", "free_port"]


class Unavailable(RuntimeError):
    """The tools for a throwaway TLS server are missing here (the test should skip)."""


@dataclass(frozen=True)
class Certificate:
    """A self-signed certificate (also its own CA) and its private key, as PEM files."""

    cert: Path
    key: Path


def free_port() -> int:
    """Return a TCP port of 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def self_signed(folder: Path) -> Certificate:
    """Write a self-signed certificate for 127.0.0.1 and localhost into *folder*.

    Raises Unavailable when ``openssl`` is missing or fails.
    """
    openssl = shutil.which("openssl") or "/usr/bin/openssl"
    if not os.path.exists(openssl):
        raise Unavailable("openssl is not installed")
    cert, key = folder / "server.crt", folder / "server.key"
    try:
        subprocess.run(
            [
                openssl,
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=127.0.0.1",
                "-addext",
                "subjectAltName=IP:127.0.0.1,DNS:localhost",
                "-keyout",
                str(key),
                "-out",
                str(cert),
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise Unavailable(f"openssl could not make a certificate: {exc}") from exc
    key.chmod(0o600)
    return Certificate(cert, key)


def _pg_bin() -> Path:
    candidates = [os.environ.get("PGQUE_TEST_PG_BIN", "")]
    found = shutil.which("initdb")
    if found:
        candidates.append(str(Path(found).parent))
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for folder in candidates:
        if folder and (Path(folder) / "initdb").exists() and (Path(folder) / "pg_ctl").exists():
            return Path(folder)
    raise Unavailable("no initdb/pg_ctl found (set PGQUE_TEST_PG_BIN)")


def _as_server_user() -> list[str]:
    """Return the command prefix that runs PostgreSQL's tools as a non-root user."""
    if os.geteuid() != 0:
        return []
    runuser = shutil.which("runuser")
    try:
        import pwd

        pwd.getpwnam("postgres")
    except (ImportError, KeyError) as exc:
        raise Unavailable("running as root and there is no 'postgres' user") from exc
    if runuser is None:
        raise Unavailable("running as root and runuser is missing")
    return [runuser, "-u", "postgres", "--"]


class TlsPostgres:
    """A private PostgreSQL cluster that accepts only TLS connections with a password.

    ``url(password=..., sslmode=...)`` builds a URL for user ``pgque``; :attr:`cert` is the CA to
    verify the server with. Raises Unavailable when the tools are missing, RuntimeError when the
    server fails to start.
    """

    USER = "pgque"

    def __init__(self, password: str) -> None:
        self.password = password
        self.port = free_port()
        self._folder = Path(tempfile.mkdtemp(prefix="pgque-tls-pg-"))
        self._bin = _pg_bin()
        self._prefix = _as_server_user()
        self._started = False
        self.cert: Path = self._folder / "ca.crt"

    def _run(self, *args: str) -> None:
        result = subprocess.run(
            [*self._prefix, *args], capture_output=True, text=True, timeout=120, check=False
        )
        if result.returncode != 0:
            raise RuntimeError(f"{Path(args[0]).name} failed: {result.stderr.strip()[-500:]}")

    def start(self) -> TlsPostgres:
        """Initialise and start the cluster; return self."""
        folder = self._folder
        os.chmod(folder, 0o755)
        certificate = self_signed(folder)
        shutil.copy(certificate.cert, self.cert)
        data = folder / "data"
        pwfile = folder / "pw"
        pwfile.write_text(self.password + "\n", encoding="utf-8")
        if self._prefix:
            shutil.chown(folder, "postgres", "postgres")
            for path in (certificate.cert, certificate.key, pwfile):
                shutil.chown(path, "postgres", "postgres")
        self._run(
            str(self._bin / "initdb"),
            "-D",
            str(data),
            "-U",
            self.USER,
            "--pwfile",
            str(pwfile),
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--no-sync",
        )
        hba = data / "pg_hba.conf"
        hba.write_text(
            "local all all trust\n"
            "hostssl all all 127.0.0.1/32 scram-sha-256\n"
            "hostnossl all all 127.0.0.1/32 reject\n",
            encoding="utf-8",
        )
        options = " ".join(
            [
                f"-c port={self.port}",
                "-c listen_addresses=127.0.0.1",
                f"-c unix_socket_directories={folder}",
                "-c ssl=on",
                f"-c ssl_cert_file={certificate.cert}",
                f"-c ssl_key_file={certificate.key}",
                "-c fsync=off",
                "-c max_connections=30",
            ]
        )
        self._run(
            str(self._bin / "pg_ctl"),
            "-D",
            str(data),
            "-o",
            options,
            "-l",
            str(folder / "log"),
            "-w",
            "-t",
            "60",
            "start",
        )
        self._started = True
        return self

    def url(self, *, password: str | None = None, sslmode: str = "verify-full") -> str:
        """Return a URL for the cluster's superuser ``pgque`` over TCP with *sslmode*."""
        secret = self.password if password is None else password
        query = f"sslmode={sslmode}"
        if sslmode.startswith("verify"):
            query += f"&sslrootcert={self.cert}"
        return f"postgresql://{self.USER}:{secret}@127.0.0.1:{self.port}/postgres?{query}"

    def stop(self) -> None:
        """Stop the cluster and delete its folder; idempotent."""
        if self._started:
            self._started = False
            with contextlib.suppress(RuntimeError, OSError, subprocess.SubprocessError):
                self._run(
                    str(self._bin / "pg_ctl"),
                    "-D",
                    str(self._folder / "data"),
                    "-m",
                    "immediate",
                    "stop",
                )
        shutil.rmtree(self._folder, ignore_errors=True)


def _redis_server() -> str:
    candidates = [os.environ.get("PGQUE_TEST_REDIS_SERVER", ""), "/usr/bin/redis-server"]
    found = shutil.which("redis-server")
    if found:
        candidates.append(found)
    for path in candidates:
        if path and os.path.exists(path):
            return path
    raise Unavailable("no redis-server found (set PGQUE_TEST_REDIS_SERVER)")


class TlsRedis:
    """A private ``redis-server`` with only a TLS port and a password.

    Raises Unavailable when redis-server is missing or built without TLS.
    """

    def __init__(self, password: str) -> None:
        self.password = password
        self.port = free_port()
        self._folder = Path(tempfile.mkdtemp(prefix="pgque-tls-redis-"))
        self._process: subprocess.Popen[bytes] | None = None
        self.cert: Path = self._folder / "server.crt"

    def start(self) -> TlsRedis:
        """Start the server and wait until its port accepts connections; return self."""
        certificate = self_signed(self._folder)
        server = _redis_server()
        log = self._folder / "log"
        self._process = subprocess.Popen(
            [
                server,
                "--port",
                "0",
                "--tls-port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--tls-cert-file",
                str(certificate.cert),
                "--tls-key-file",
                str(certificate.key),
                "--tls-ca-cert-file",
                str(certificate.cert),
                "--tls-auth-clients",
                "no",
                "--requirepass",
                self.password,
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self._folder),
                "--logfile",
                str(log),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                text = log.read_text(errors="replace") if log.exists() else ""
                self.stop()
                raise Unavailable(f"redis-server did not start with TLS: {text[-300:]}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5),
            ):
                return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("redis-server did not open its TLS port within 20 s")

    def url(self, *, password: str | None = None, scheme: str = "rediss") -> str:
        """Return a URL of the server that verifies its certificate (for ``rediss``)."""
        secret = self.password if password is None else password
        url = f"{scheme}://:{secret}@127.0.0.1:{self.port}/0"
        if scheme == "rediss":
            url += f"?ssl_cert_reqs=required&ssl_ca_certs={self.cert}"
        return url

    def stop(self) -> None:
        """Stop the server and delete its folder; idempotent."""
        process, self._process = self._process, None
        if process is not None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        shutil.rmtree(self._folder, ignore_errors=True)

"""A private PostgreSQL cluster (`initdb` + `pg_ctl` on a free port in a temp directory),
for the tests that kill the database itself: `kill9()` SIGKILLs the postmaster, `start()`
brings it back on the same port and data.

`initdb` refuses to run as root, and CI runs as root: then every PostgreSQL command runs
as the `postgres` user (`runuser -u postgres --`) and the directory is theirs.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg

from tests.e2e._proc import free_port


def pg_bin() -> Path | None:
    """The newest installed server's bin directory (Debian: /usr/lib/postgresql/N/bin)."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parent.parent.name),
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


class PgCluster:
    def __init__(self, bin_dir: Path) -> None:
        self.bin = bin_dir
        self.port = free_port()
        # Not under pytest's tmp_path: that is 0700 root, which `postgres` cannot enter.
        self.root = Path(tempfile.mkdtemp(prefix="nua-pgcluster-"))
        self.data = self.root / "data"
        self.log = self.root / "postgres.log"
        self._as: list[str] = []
        if os.geteuid() == 0:
            self._as = ["runuser", "-u", "postgres", "--"]
            owner = pwd.getpwnam("postgres")
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self._as, *args], capture_output=True, text=True, timeout=timeout, check=False
        )

    def init(self) -> PgCluster:
        done = self._run(
            str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres",
            "--no-sync", "-E", "UTF8",
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stdout}{done.stderr}")
        return self

    def start(self, timeout: float = 120) -> None:
        """Start the postmaster; after a kill -9 the orphaned backends may still hold the
        shared memory for a moment (`pg_ctl` then refuses), so retry until it answers."""
        opts = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} "
            "-c max_connections=300 -c fsync=on"
        )
        deadline = time.monotonic() + timeout
        while True:
            done = self._run(
                str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log),
                "-o", opts, "-w", "-t", "60", "start",
            )  # fmt: skip
            if done.returncode == 0 and self.ready():
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"pg_ctl start failed: {done.stdout}{done.stderr}")
            time.sleep(0.5)

    def ready(self) -> bool:
        try:
            with psycopg.connect(self.url, connect_timeout=3) as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.Error:
            return False

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (FileNotFoundError, ValueError):
            return None

    def kill9(self) -> None:
        """SIGKILL the postmaster (no shutdown checkpoint: the next start runs crash
        recovery from the WAL). Its backends notice their parent died and exit."""
        pid = self.postmaster_pid()
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)

    def stop(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def create_db(self, name: str) -> str:
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url.rsplit("/", 1)[0] + f"/{name}"


@contextlib.contextmanager
def pg_cluster() -> Iterator[PgCluster]:
    bin_dir = pg_bin()
    if bin_dir is None:
        raise RuntimeError("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
    cluster = PgCluster(bin_dir).init()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.remove()

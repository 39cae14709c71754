"""A throwaway PostgreSQL cluster (initdb) on its own port, for tests that restart the database server;
never the shared server. The ``pg_cluster`` fixture (``trellis.testing.plugin``) starts one per test."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile

from .ports import free_port

BINARIES = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))


class Cluster:
    def __init__(self) -> None:
        self.bin = os.path.dirname(BINARIES[-1])
        self.folder = tempfile.mkdtemp(prefix="trellis-pg-")
        self.port = free_port()
        self.as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self.as_postgres:  # initdb refuses to run as root
            shutil.chown(self.folder, "postgres")
        self._run("initdb", "-D", self.folder, "-A", "trust", "-U", "postgres", "--no-sync")
        self.url = f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run(
            [*self.as_postgres, os.path.join(self.bin, tool), *args],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=120,
        )

    def pg_ctl(self, action: str) -> None:
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            "pg_ctl",
            "-D",
            self.folder,
            "-o",
            options,
            "-m",
            "fast",
            "-w",
            "-l",
            os.path.join(self.folder, "log"),
            action,
        )

    def remove(self) -> None:
        try:
            self._run("pg_ctl", "-D", self.folder, "-m", "immediate", "-w", "stop")
        except subprocess.CalledProcessError:
            pass  # not running
        shutil.rmtree(self.folder, ignore_errors=True)

"""Real NoneBot bot processes for the black-box tests: a free port, the plugin distribution
installed with pip, and a ``bot.py`` run until the test is done (``docs/bot.md``)."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from base_support import ROOT

__all__ = ["DISTRIBUTION", "free_port", "install_distribution", "running_bot"]

#: The ``nonebot-plugin-promptweave`` distribution's folder.
DISTRIBUTION = ROOT / "contrib" / "nonebot-plugin-promptweave"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def install_distribution(root: Path) -> Path:
    """The plugin distribution installed with pip into ``root/site``; pip builds from a copy in
    ``root/source``, so the checkout stays untouched."""
    source = root / "source"
    shutil.copytree(DISTRIBUTION, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    site = root / "site"
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"),
            *("--no-build-isolation", "--target", str(site), str(source)),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return site


@contextmanager
def running_bot(
    folder: Path, port: int, env: Mapping[str, str]
) -> Iterator[subprocess.Popen[bytes]]:
    """``python bot.py`` in ``folder`` with ``env``, once it listens on ``port``; stopped with
    SIGINT (as an operator's Ctrl-C) when the block ends. Its output goes to ``folder/bot.log``:
    a file, not a pipe, which nobody would read while the test runs and which blocks when full."""
    log_file = folder / "bot.log"
    log = log_file.open("w")
    process = subprocess.Popen(
        [sys.executable, "bot.py"], cwd=folder, env=dict(env), stdout=log, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise AssertionError(log_file.read_text())
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        else:
            raise AssertionError(f"the bot did not listen on {port}: {log_file.read_text()}")
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log.close()

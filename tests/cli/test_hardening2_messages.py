"""Messages that misled: each says what happened now.

(a) A cache folder that cannot be written (a read-only mount, no permission) was reported as
    "cache.db is damaged": sqlite only says "unable to open database file". It is now "cache
    directory DIR is not writable (Read-only file system); give --cache-dir a writable folder …".
(b) SIGTERM while the report is written ended the process at once (status -15, no word), where it
    exits 130 "interrupted" everywhere else; now it does there too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from cli_under_test import checkout_under_test, run_main
from synthetic_data import make_mcq_jsonl

from evalkit.sim.from_bench import answer_key_for
from evalkit.sim.server import SimConfig, SimThread


def _args(data, url: str, out, cache) -> list[str]:
    return ["run", "mcq", "--model", "vllm/sim-model", "--data", str(data), "--out", str(out), "--base-url", url,
            "--no-progress", "--cache-dir", str(cache)]


@pytest.fixture
def read_only(tmp_path):
    """A folder made read-only after the test's setup wrote into it: `seal()` makes it so (a read-only
    tmpfs for root, whom permissions do not stop; chmod otherwise)."""
    where = tmp_path / "ro"
    where.mkdir()
    mounted = False
    if os.geteuid() == 0:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(where)], capture_output=True)
        if done.returncode != 0:
            pytest.skip("a read-only folder needs a tmpfs mount here (root ignores permissions); mount is not allowed")
        mounted = True

    def seal() -> None:
        if mounted:
            subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)
        else:
            for folder, _, _ in os.walk(where):
                os.chmod(folder, 0o555)

    try:
        yield where, seal
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(where)], capture_output=True)
        else:
            for folder, _, _ in os.walk(where):
                os.chmod(folder, 0o755)


def test_a_read_only_cache_folder_is_not_called_damaged(tmp_path, read_only):
    where, seal = read_only
    data = make_mcq_jsonl(tmp_path / "ds", 3, seed=2)
    cache = where / "cache"
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        first = run_main(_args(data, sim.url, tmp_path / "run", cache))
        assert first.returncode == 0, first.stderr
        seal()
        again = run_main(_args(data, sim.url, tmp_path / "run2", cache))
        sent = sim.counters.snapshot()["requests"]
    stats = run_main(["cache", "stats", "--cache-dir", str(cache)])
    said = (f"evalkit: error: cache directory {cache} is not writable (Read-only file system); give --cache-dir "
            "a writable folder or use --no-cache")
    for done in (again, stats):
        assert done.returncode == 2 and done.stderr.strip().splitlines() == [said], done.stderr
        assert "damaged" not in done.stderr
    assert sent == 3  # the second run sent nothing


_REPORT_KILLED = """
import os, signal, sys
sys.path[:] = [p for p in sys.path if p not in ('', '.')]
import evalkit.engine.closing as closing
real = closing.publish
def publish(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGTERM)  # in the report phase, after every answer is in
    return real(*args, **kwargs)
closing.publish = publish
from evalkit.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_sigterm_while_reporting_exits_130_like_elsewhere(tmp_path):
    data = make_mcq_jsonl(tmp_path / "ds", 4, seed=3)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        args = _args(data, sim.url, tmp_path / "run", tmp_path / "cache") + ["--no-plots"]
        env = {**os.environ, "PYTHONPATH": str(checkout_under_test())}
        killed = subprocess.run([sys.executable, "-c", _REPORT_KILLED, *args], capture_output=True, text=True,
                                env=env, timeout=120)
        again = run_main(args)
        sent = sim.counters.snapshot()["requests"]
    assert killed.returncode == 130, (killed.returncode, killed.stderr)
    assert killed.stderr.strip().splitlines()[-1] == "evalkit: interrupted; re-run the same command to resume"
    assert "Traceback" not in killed.stderr
    assert again.returncode == 0 and sent == 4  # every answer was kept: the re-run only reports


def test_the_command_gives_sigterm_back(capsys):
    from evalkit.cli import main

    before = signal.getsignal(signal.SIGTERM)
    assert main(["list"]) == 0
    assert signal.getsignal(signal.SIGTERM) is before


_SMALL_LIMIT = """
import sys
sys.path[:] = [p for p in sys.path if p not in ('', '.')]
from PIL import Image
Image.MAX_IMAGE_PIXELS = 5_000  # the test's images (96 x 96) are over it, and under twice it
from evalkit.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_decompression_bomb_warning_is_evalkits_own_line(tmp_path):
    """(c) Pillow's DecompressionBombWarning was printed raw (a site-packages path, Pillow's code line);
    now one line per image names it, its pixel count and what to do, and the run goes on."""
    data = make_mcq_jsonl(tmp_path / "ds", 3, seed=4)
    with SimThread(SimConfig(answer_key=answer_key_for("mcq", {"data": str(data)}))) as sim:
        args = _args(data, sim.url, tmp_path / "run", tmp_path / "cache") + ["--no-plots"]
        env = {**os.environ, "PYTHONPATH": str(checkout_under_test()), "PYTHONWARNINGS": "default"}
        done = subprocess.run([sys.executable, "-c", _SMALL_LIMIT, *args], capture_output=True, text=True,
                              env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "DecompressionBombWarning" not in done.stderr and "site-packages" not in done.stderr, done.stderr
    said = sorted(line for line in done.stderr.splitlines() if "decompression-bomb" in line)
    images = sorted((tmp_path / "ds" / "images").glob("*.png"))
    assert said == [f"evalkit: image {p} has 9,216 pixels, more than Pillow's decompression-bomb limit of 5,000: "
                    "it is decoded all the same (about 0 MB of memory); if it is not meant to be that large, replace "
                    "it with a smaller copy" for p in images]

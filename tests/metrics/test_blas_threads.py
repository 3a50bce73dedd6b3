"""The reliability fit's tiny linear algebra runs on one BLAS thread: a pool of OpenBLAS threads only
spins on 3-parameter problems (76 ms per fit instead of 3 ms on a busy 2-core machine)."""

from __future__ import annotations

import os

from evalkit.cli import main


def test_the_command_sets_one_blas_thread_unless_the_user_chose(monkeypatch, capsys) -> None:
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "4")
    assert main(["list"]) == 0
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1"
    assert os.environ["MKL_NUM_THREADS"] == "4"  # the user's choice stands
    assert "tdbench" in capsys.readouterr().out

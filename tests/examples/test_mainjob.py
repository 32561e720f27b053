"""The main job (`make run`, examples/mainjob.py) says when it removes an earlier run's store, and never removes
anything else."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
from mainjob import main  # noqa: E402


def test_main_job_says_it_replaces_its_own_store_and_leaves_other_files_alone(tmp_path, capsys):
    store = tmp_path / "work" / "store"
    assert main(["--store", str(store), "--messages", "3000", "--segment-mb", "1", "--no-spark"]) == 0
    assert "removing" not in capsys.readouterr().out
    assert main(["--store", str(store), "--messages", "3000", "--segment-mb", "1", "--no-spark"]) == 0
    assert f"removing the store an earlier run left at {store}" in capsys.readouterr().out
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    assert main(["--store", str(mine), "--messages", "10", "--no-spark"]) == 1
    assert "is not a store this job wrote" in capsys.readouterr().err
    assert (mine / "notes.txt").read_text() == "keep me"

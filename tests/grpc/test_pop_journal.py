"""The pop state's journal: every change survives a crash; a torn last line is ignored; compaction."""

import os

from rocketstore.broker import journal as J


def test_changes_survive_without_a_clean_close_and_a_torn_tail_is_ignored(tmp_path):
    path = str(tmp_path / "config" / "popState.json")
    s = J.JournaledState(path)
    table = {"T@g": {"0": {"next": 5, "inflight": {"3": [1, 2, 1, 9]}}}}
    s.append({"T@g": table["T@g"]}, table)
    table["T@g"]["0"]["inflight"].clear()
    s.append({"T@g": table["T@g"]}, table)
    table["U@h"] = {"1": {"next": 1, "inflight": {}}}
    s.append({"U@h": table["U@h"]}, table)
    s.append({"U@h": None}, table)  # dropped again
    # no close: a crash. A half-written line at the end was never answered.
    with open(path + ".journal", "ab") as fh:
        fh.write(b'{"k":"T@g","v":{"0":{"next":99')
    assert J.JournaledState(path).load() == {"T@g": {"0": {"next": 5, "inflight": {}}}}


def test_compaction_rewrites_the_snapshot_and_empties_the_journal(tmp_path, monkeypatch):
    path = str(tmp_path / "popState.json")
    monkeypatch.setattr(J, "COMPACT_AT", 200)
    s = J.JournaledState(path)
    table = {}
    for i in range(20):
        table[f"T{i}@g"] = {"0": {"next": i, "inflight": {}}}
        s.append({f"T{i}@g": table[f"T{i}@g"]}, table)
    assert os.path.getsize(path + ".journal") < 200 and os.path.exists(path)
    assert J.JournaledState(path).load() == table
    s.close(table)
    assert os.path.getsize(path + ".journal") == 0 and J.JournaledState(path).load() == table

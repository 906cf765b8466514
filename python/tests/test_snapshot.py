"""actsim snapshot on pickles of PyTorch's documented snapshot structure (snapshot_fixtures.py):
peaks known by construction, both layouts, and hostile or broken files refused with one line."""

import csv
import io
import json
import os

import pytest

import actsim
import snapshot_fixtures as fx
from actsim import snapshot as converter


@pytest.fixture()
def files(tmp_path):
    fx.main(str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("name,legacy", [("training_step", False),
                                         ("training_step_legacy", True)])
def test_peaks_of_a_known_step(cli, files, name, legacy):
    _, want = fx.training_step(legacy=legacy)
    p = cli.run("snapshot", str(files / f"{name}.pickle"), "--format", "json")
    got = json.loads(p.stdout)
    snap = got["snapshot"]
    assert got["source"] == "snapshot"
    assert int(got["peak_allocated_bytes"]) == want["peak_allocated_bytes"]
    assert int(got["peak_requested_bytes"]) == want["peak_requested_bytes"]
    assert int(got["peak_reserved_bytes"]) == want["peak_reserved_bytes"]
    assert got["peak_phase"] == "forward"
    assert snap["layout"] == ("history" if legacy else "frames")
    assert snap["allocated"]["event"] == want["allocated_event"]
    assert snap["reserved"]["event"] == want["reserved_event"]
    assert snap["start_allocated_bytes"] == want["start_allocated_bytes"]
    assert snap["start_reserved_bytes"] == want["start_reserved_bytes"]
    if legacy:
        assert snap["allocated"]["time_us"] == -1 and snap["duration_us"] == -1
    else:
        assert snap["allocated"]["time_us"] == 300  # 100 us per event from the first
    largest = [(b["allocated_bytes"], b["frame"]) for b in snap["largest_at_peak"]]
    assert largest == want["largest_at_peak"]
    assert snap["largest_at_peak"][0]["event"] == -1  # the weights: live before the trace


def test_table_names_peaks_and_frames(cli, files):
    out = cli.run("snapshot", str(files / "training_step.pickle")).stdout
    assert "peak allocated" in out and "peak reserved" in out
    assert "/home/u/train/model.py:57:mlp" in out
    assert "before the trace" in out


def test_csv_row_is_schema_v1(cli, files):
    p = cli.run("snapshot", str(files / "training_step.pickle"), "--format", "csv",
                "--model", "gpt2-small", "--batch", "4", "--seq", "512")
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    assert len(rows) == 1 and list(rows[0]) == actsim.columns()
    r = rows[0]
    assert r["source"] == "snapshot" and r["model"] == "gpt2-small"
    assert r["batch"] == "4" and r["seq"] == "512"
    _, want = fx.training_step()
    assert int(r["peak_allocated_bytes"]) == want["peak_allocated_bytes"]
    assert r["step_time_ns"] == ""  # not measured: empty, never made up


@pytest.mark.parametrize("name", sorted(fx.hostile()) + ["no_history", "unknown_action"])
def test_bad_pickles_refused_with_one_line(cli, files, name, tmp_path):
    path = files / (f"hostile_{name}.pickle" if name in fx.hostile() else f"{name}.pickle")
    out = tmp_path / "out.csv"
    p = cli.run("snapshot", str(path), "--format", "csv", "-o", str(out), ok=False)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"actsim: error: {path}: "), p.stderr
    assert p.stdout == "" and not out.exists()
    assert not (files / "PWNED").exists() and not os.path.exists("PWNED")


def test_hostile_pickles_never_run_code_in_python(files, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    for name, data in fx.hostile().items():
        with pytest.raises(converter.SnapshotError):
            converter.convert(converter.load_pickle(data))
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("text,what", [
    ("{", "not JSON"),
    ('{"format": "actsim-snapshot", "version": 13421e728}', "not JSON"),  # found by fuzz_snapshot
    ("[]", "format"),
    ('{"format": "actsim-snapshot", "version": 2}', "version"),
    ('{"format": "actsim-snapshot", "version": 1, "file": "x", "layout": "frames", '
     '"devices": [{"index": 0, "segments": [], "live": [], '
     '"trace": [{"action": "alloc", "addr": 1, "size": -5, "stream": 0, "time_us": null, '
     '"frame": "", "phase": ""}]}]}', "byte count"),
    ('{"format": "actsim-snapshot", "version": 1, "file": "x", "layout": "frames", '
     '"devices": [{"index": 18446744073709551616, "segments": [], "live": [], "trace": []}]}',
     "64-bit integer"),
    ('{"format": "actsim-snapshot", "version": 1, "file": "x", "layout": "frames", '
     '"devices": [{"index": 0, "segments": [], "live": [], "trace": ['
     + ",".join(['{"action": "segment_alloc", "addr": 1, "size": 72057594037927936, '
                 '"stream": 0, "time_us": 5, "frame": "", "phase": ""}'] * 200)
     + ']}]}', "overflow"),
    ('{"format": "actsim-snapshot", "version": 1, "file": "x", "layout": "frames", '
     '"devices": [{"index": 0, "segments": [], "live": [], '
     '"trace": [{"action": "segment_alloc", "addr": 1, "size": 5, "stream": 0, '
     '"time_us": null, "frame": "", "phase": ""}]}]}', "segments"),
    ('{"format": "actsim-snapshot", "version": 1, "file": "x", "layout": "frames", '
     '"devices": [{"index": 0, "segments": [], "live": [], "trace": []}]}', "no device trace"),
])
def test_malformed_json_refused(cli, tmp_path, text, what):
    path = tmp_path / "bad.json"
    path.write_text(text)
    p = cli.run("snapshot", str(path), ok=False)
    assert p.returncode == 2 and p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and what in lines[0], p.stderr


def test_converted_json_reads_the_same(cli, files, tmp_path):
    js = tmp_path / "step.json"
    assert converter.main(["snapshot.py", str(files / "training_step.pickle"), "-o", str(js)]) == 0
    a = json.loads(cli.run("snapshot", str(js), "--format", "json").stdout)
    b = json.loads(cli.run("snapshot", str(files / "training_step.pickle"),
                           "--format", "json").stdout)
    assert a["peak_allocated_bytes"] == b["peak_allocated_bytes"]
    assert a["snapshot"]["largest_at_peak"] == b["snapshot"]["largest_at_peak"]


def test_mutated_pickles_fail_only_with_snapshot_errors(tmp_path, monkeypatch):
    """A small mutation fuzzer over a real snapshot pickle (seeded: the same cases every run):
    flipped, dropped and inserted bytes and cuts either convert or raise SnapshotError."""
    import random
    monkeypatch.chdir(tmp_path)
    good, _ = fx.training_step()
    rng = random.Random(14)
    outcomes = {"ok": 0, "refused": 0}
    for _ in range(1500):
        data = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(data))
            op = rng.randrange(4)
            if op == 0:
                data[i] = rng.randrange(256)
            elif op == 1:
                del data[i]
            elif op == 2:
                data.insert(i, rng.randrange(256))
            else:
                del data[i:]
                break
        try:
            converter.convert(converter.load_pickle(bytes(data)))
            outcomes["ok"] += 1
        except converter.SnapshotError:
            outcomes["refused"] += 1
    assert outcomes["refused"] > 100 and sum(outcomes.values()) == 1500
    assert list(tmp_path.iterdir()) == []

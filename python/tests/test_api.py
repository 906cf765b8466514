"""actsim's Python functions against the actsim CLI: the same rows, values and errors."""

import os
import re
import shutil
import subprocess
import sys
import threading
import time

import pytest

import actsim
from conftest import typed

# Configurations whose `actsim run --format csv` the package must reproduce field for field.
RUN_CONFIGS = [
    {},
    {"strategy": "none,full,selective,sac:mm,every:2", "batch": [1, 2], "seq": 512},
    {"model": "gpt2-medium", "allocator": "caching", "dp": 8, "zero": 3, "precision": "fp32"},
    {"model": "gpt2-small", "tp": 2, "sp": True, "dropout": 0.1, "attention": "flash"},
    {"pp": 2, "num_microbatches": 4, "strategy": "full"},
    {"strategy": "offload,offload+full", "prefetch": 2, "seq": 256},
    {"seq": range(256, 1025, 256), "optimizer": "sgd,adam-fused"},
]


def flags_to_argv(flags):
    """The same keyword arguments written as the CLI's flags (independently of the package)."""
    argv = []
    for key, value in flags.items():
        if isinstance(value, bool):
            value = "on" if value else "off"
        elif isinstance(value, range):
            value = ",".join(str(v) for v in value)
        elif isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        argv += ["--" + key.replace("_", "-"), str(value)]
    return argv


@pytest.mark.parametrize("flags", RUN_CONFIGS, ids=lambda f: ",".join(f) or "defaults")
def test_run_rows_are_the_cli_csv(cli, flags):
    header, expected = cli.csv("run", "--format", "csv", *flags_to_argv(flags))
    assert header == actsim.columns()
    rows = actsim.run(**flags)
    assert len(rows) == len(expected) >= 1
    for row, fields in zip(rows, expected):
        assert list(row) == header
        assert row == {c: typed(c, t) for c, t in zip(header, fields)}
    # The raw text too: the typed values hide nothing.
    raw = actsim._core.run_fields(actsim._args("run", flags), actsim._PACKAGE_DIR)
    assert raw == expected


def test_values_have_python_types():
    row = actsim.run(strategy="full", dropout=0.1)[0]
    assert isinstance(row["peak_allocated_bytes"], int) and row["peak_allocated_bytes"] > 0
    assert isinstance(row["mfu"], float) and 0 < row["mfu"] < 1
    assert row["fits"] is True
    assert row["dropout"] == 0.1
    assert row["error"] is None
    assert row["strategy"] == "full" and row["sp"] == "off"


def test_budget_strategy_row_holds_the_plan(cli):
    flags = {"model": "gpt2-small", "batch": 8, "strategy": "budget:12GiB"}
    header, expected = cli.csv("run", "--format", "csv", *flags_to_argv(flags))
    row = actsim.run(**flags)[0]
    assert row == {c: typed(c, t) for c, t in zip(header, expected[0])}
    assert row["strategy"].startswith("custom:")


def test_sweep_matches_cli_sweep_with_error_rows(cli):
    # tp 5 does not divide gpt2-small's 12 heads: an error row, as in the CLI's sweep.
    flags = {"strategy": "none,full", "batch": "1:4:x2", "tp": [1, 5], "seq": 256}
    header, expected = cli.csv("sweep", "--jobs", "2", *flags_to_argv(flags))
    rows = list(actsim.sweep(**flags))
    assert rows == [{c: typed(c, t) for c, t in zip(header, f)} for f in expected]
    errors = [r for r in rows if r["error"]]
    assert errors and all(r["peak_allocated_bytes"] is None for r in errors)
    assert list(actsim.sweep(jobs=1, **flags)) == rows


def test_sweep_shards_join_to_the_whole():
    flags = {"strategy": "none,full,selective", "batch": [1, 2, 3], "seq": 128}
    whole = list(actsim.sweep(**flags))
    parts = [list(actsim.sweep(shard=f"{i}/3", **flags)) for i in (1, 2, 3)]
    assert [r for p in parts for r in p] == whole
    assert [r["row_index"] for r in whole] == list(range(9))


def test_sweep_is_lazy_and_can_be_dropped():
    it = actsim.sweep(model="gpt2-small", batch="1:64", seq="128:4k:x2", strategy="none,full")
    assert len(it) == 64 * 6 * 2
    first = next(it)
    assert first["row_index"] == 0
    del it  # cancels the rest; must not hang or crash


def test_sweep_usable_by_pandas():
    pandas = pytest.importorskip("pandas")
    df = pandas.DataFrame(list(actsim.sweep(strategy="none,full", seq=[256, 512])))
    assert list(df.columns) == actsim.columns() and len(df) == 4


def test_plan_matches_cli(cli):
    header, expected = cli.csv("plan", "--format", "csv", "--budget", "12GiB", "--batch", "8")
    row = actsim.plan("12GiB", batch=8)
    assert row == {c: typed(c, t) for c, t in zip(header, expected[0])}
    assert row["peak_allocated_bytes"] <= 12 << 30
    assert actsim.plan(12 << 30, batch=8) == row


def test_valley_matches_cli(cli):
    header, expected = cli.csv("valley", "--format", "csv", "--model", "gpt2-small")
    rows = actsim.valley(model="gpt2-small")
    assert len(rows) == len(expected) == 12
    for row, fields in zip(rows, expected):
        assert list(row) == header
        assert row == {c: typed(c, t) for c, t in zip(header, fields)}
    assert sum(r["is_m_star"] for r in rows) == 1


def test_explain_peak_is_the_run_tables_items(cli):
    items = actsim.explain_peak(strategy="none", top=5)
    assert 1 <= len(items) <= 5
    sizes = [i["bytes"] for i in items]
    assert sizes == sorted(sizes, reverse=True)
    table = cli.run("run", "--strategy", "none").stdout
    for item in items:
        assert item["what"] in table and item["why"] in table
    peak = actsim.run(strategy="none")[0]["peak_allocated_bytes"]
    assert sum(sizes) <= peak


def test_models_lists_the_shipped_catalog():
    cat = actsim.models()
    names = {m["name"] for m in cat["models"]}
    assert {"gpt2-small", "llama-3-8b"} <= names
    assert "h100-sxm" in {d["name"] for d in cat["devices"]}
    small = next(m for m in cat["models"] if m["name"] == "gpt2-small")
    assert small["layers"] == 12 and small["heads"] == 12 and small["params"] > 100_000_000


@pytest.mark.parametrize("flags,argv", [
    ({"seq": "1k:x"}, ["--seq", "1k:x"]),
    ({"zero": 4}, ["--zero", "4"]),
    ({"model": "no-such-model"}, ["--model", "no-such-model"]),
    ({"tp": 5}, ["--tp", "5"]),
    ({"strategy": "every:0"}, ["--strategy", "every:0"]),
    ({"no_such_flag": 1}, ["--no-such-flag=1"]),
])
def test_errors_carry_the_cli_message(cli, flags, argv):
    p = cli.run("run", *argv, ok=False)
    assert p.returncode == 2
    message = p.stderr.strip()
    assert message.startswith("actsim: error: ")
    with pytest.raises(actsim.ConfigError) as e:
        actsim.run(**flags)
    # The folders searched for a model name are the package's, not the binary's.
    def unfold(text):
        return re.sub(r"searched [^;]*;", "searched ...;", text)
    assert unfold(str(e.value)) == unfold(message[len("actsim: error: "):])
    assert isinstance(e.value, ValueError)


def test_python_side_refusals():
    for bad in ({"format": "csv"}, {"output": "x.csv"}, {"batch": []}, {"batch": range(0)},
                {"batch": object()}, {"batch": [[1]]}):
        with pytest.raises(actsim.ConfigError):
            actsim.run(**bad)
    with pytest.raises(actsim.ConfigError, match="--budget"):
        actsim.plan("lots")
    with pytest.raises(actsim.ConfigError, match="one configuration"):
        actsim.valley(batch=[1, 2])


def test_gil_is_released_while_simulating():
    done = threading.Event()

    rows = []

    def work():
        try:  # about 2,300 simulations: half a second or more here
            rows.extend(actsim.run(model="llama-3-8b,llama-2-13b,llama-3-70b",
                                   strategy="none,full,selective,sac:mm", batch="1:32",
                                   seq="1k:32k:x2"))
        finally:
            done.set()

    t = threading.Thread(target=work)
    start = last = time.monotonic()
    gap = 0.0
    t.start()
    while not done.is_set():
        time.sleep(0.001)
        now = time.monotonic()
        gap, last = max(gap, now - last), now
    t.join()
    elapsed = time.monotonic() - start
    # Holding the GIL, the simulation would stop this loop for its whole duration: one gap of
    # about `elapsed`. Released, the loop keeps ticking.
    assert len(rows) == 3 * 4 * 32 * 6
    assert elapsed > 0.2, "too little work to tell"
    assert gap < elapsed / 2, (gap, elapsed)


def test_installed_package_needs_no_checkout(tmp_path):
    pkg = os.path.dirname(actsim.__file__)
    shutil.copytree(pkg, tmp_path / "actsim")
    env = {k: v for k, v in os.environ.items() if k not in ("ACTSIM_MODELS", "PYTHONPATH")}
    env["PYTHONPATH"] = str(tmp_path)
    code = ("import actsim; r = actsim.run(model='llama-3-8b', device='a100-80gb', seq=128)[0]; "
            "print(r['peak_allocated_bytes'] > 0, actsim.models()['searched'])")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("True") and str(tmp_path) in p.stdout

"""Shared helpers: the CLI binary the package is compared with (ctest sets ACTSIM_CLI)."""

import csv
import io
import os
import re
import subprocess

import pytest

TEXT_COLUMNS = {"source", "model", "device", "strategy", "profile", "precision", "attention",
                "sp", "optimizer", "allocator", "peak_phase", "error", "impl",
                "impl_version"}  # implver: "4.48" is a release, not a number
_INT = re.compile(r"-?[0-9]+\Z")
_FLOAT = re.compile(r"-?[0-9]+\.[0-9]+\Z")


def typed(column, text):
    """The package's documented reading of one CSV field."""
    if text == "":
        return None
    if column in TEXT_COLUMNS:
        return text
    if text in ("true", "false"):
        return text == "true"
    if _INT.match(text):
        return int(text)
    if _FLOAT.match(text):
        return float(text)
    return text


@pytest.fixture(scope="session")
def cli():
    exe = os.environ.get("ACTSIM_CLI")
    if not exe:
        pytest.fail("ACTSIM_CLI is not set: run these tests through ctest (python.pytest)")

    class Cli:
        path = exe

        @staticmethod
        def run(*args, ok=True):
            p = subprocess.run([exe, *args], capture_output=True, text=True)
            if ok and p.returncode != 0:
                raise AssertionError(f"actsim {' '.join(args)}: {p.returncode}: {p.stderr}")
            return p

        @staticmethod
        def csv(*args):
            """The CLI's CSV as (header, rows of text fields)."""
            out = Cli.run(*args).stdout
            rows = list(csv.reader(io.StringIO(out)))
            return rows[0], rows[1:]

    return Cli

"""PyTorch CUDA memory snapshots (torch.cuda.memory._dump_snapshot) as actsim's snapshot JSON.

Standard library only: no torch is needed, and nothing in the file runs. The pickle is read by
an unpickler that admits plain types only (dict, list, tuple, str, bytes, int, float, bool,
None): any class or function reference (the GLOBAL, STACK_GLOBAL, INST, OBJ opcodes that
REDUCE and BUILD would call) is refused, and so are persistent ids.

The structure is the one torch/cuda/memory.py documents for _snapshot() (pytorch/pytorch, e.g.
commit 00b65a04a2d30e498eedcb1e3476abd547f428f1), read the way torch/cuda/_memory_viz.py reads
it, in both layouts it handles:

  {"segments": [Segment], "device_traces": [[TraceEntry] per device], ...}
  Segment:    device, address, total_size, stream, segment_type, blocks: [Block], ...
  Block:      size, state ("active_allocated", "active_awaiting_free", "inactive"), address,
              and either  requested_size, frames: [Frame]           (PyTorch 2.1 and later)
              or          history: [{addr, real_size, frames}]       (2.0 and earlier)
  TraceEntry: action (alloc, free_requested, free_completed, segment_alloc, segment_free,
              segment_map, segment_unmap, oom, snapshot, annotate), addr, size, stream,
              frames, and time_us (2.1 and later), device_free (oom)
  Frame:      filename, line, name

The output (format "actsim-snapshot", version 1) keeps, per device with a trace, the events in
order with their size, the deepest user frame ("file.py:line:function", the innermost Python
frame outside torch itself) and a phase hint from the frames (backward: the autograd engine;
optimizer: torch/optim), and the live blocks at the end with the same. Sizes in trace entries are
requested sizes (CUDACachingAllocator.cpp records orig_size at alloc and requested_size at
free_requested); segment sizes are cudaMalloc'd bytes.

Usage: python3 snapshot.py FILE.pickle [-o FILE.json]. Bad input: one line on stderr naming the
file and what is wrong, exit status 2, no output.
"""

from __future__ import annotations

import io
import json
import pickle
import sys
from typing import Any, Dict, List, Optional, Tuple

FORMAT = "actsim-snapshot"
VERSION = 1

# Actions PyTorch's TraceEntry documents; anything else is a version we do not know.
ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "oom", "snapshot", "annotate"}
BLOCK_STATES = {"active_allocated", "active_awaiting_free", "inactive"}

# _memory_viz.py's _frame_filter: frames that are the interpreter or the dispatcher, not code.
_OMIT_FUNCTIONS = ("unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start",
                   "__libc_start_main", "PyEval_", "PyObject_", "PyFunction_")
_OMIT_FILES = ("core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c",
               "Objects/call.c", "Objects/methodobject.c", "pycore_ceval.h", "ceval.c",
               "cpython/abstract.h")


class SnapshotError(Exception):
    """Bad input; str() is the one-line reason (the caller prefixes the file)."""


class _PlainUnpickler(pickle.Unpickler):
    """Admits plain types only: every class or callable reference is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise SnapshotError(f"refused: the pickle references {module}.{name} (a snapshot holds "
                            "plain dicts and lists only; a pickle that names classes can run code)")

    def persistent_load(self, pid: Any) -> Any:
        raise SnapshotError("refused: the pickle uses persistent ids (not a memory snapshot)")


def load_pickle(data: bytes) -> Any:
    try:
        return _PlainUnpickler(io.BytesIO(data)).load()
    except SnapshotError:
        raise
    except RecursionError:
        raise SnapshotError("not a snapshot: the pickle nests too deeply") from None
    except MemoryError:
        raise SnapshotError("not a snapshot: the pickle does not fit in memory") from None
    except Exception as e:  # truncated or malformed: EOFError, UnpicklingError, ValueError, ...
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise SnapshotError(f"not a readable pickle ({type(e).__name__}: {reason})") from None


def _int(d: Dict[str, Any], key: str, where: str, default: Optional[int] = None) -> int:
    v = d.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int):
        if v is None and default is None:
            raise SnapshotError(f"{where}: missing '{key}'")
        raise SnapshotError(f"{where}: '{key}' is {type(v).__name__}, not an integer")
    return v


def _is_user_file(filename: str) -> bool:
    f = filename.replace("\\", "/")
    if not f.endswith(".py"):
        return False
    return "/torch/" not in f and not f.startswith("torch/") and "/site-packages/torch" not in f


def _frames(v: Any, where: str) -> List[Dict[str, Any]]:
    if v is None:
        return []
    if not isinstance(v, list):
        raise SnapshotError(f"{where}: 'frames' is {type(v).__name__}, not a list")
    out = []
    for f in v:
        if not isinstance(f, dict) or not isinstance(f.get("filename"), str) \
                or not isinstance(f.get("name"), str):
            raise SnapshotError(f"{where}: a frame without 'filename' and 'name'")
        out.append(f)
    return out


def user_frame(frames: List[Dict[str, Any]]) -> str:
    """The deepest (innermost) user frame: frames are innermost first, as _memory_viz.py
    reverses them for flame graphs."""
    for f in frames:
        if _is_user_file(f["filename"]):
            line = f.get("line")
            return f"{f['filename']}:{line if isinstance(line, int) else '?'}:{f['name']}"
    return ""


def phase_hint(frames: List[Dict[str, Any]]) -> str:
    """backward, optimizer or forward from the frames; empty without frames."""
    if not frames:
        return ""
    for f in frames:
        name, filename = f["name"], f["filename"].replace("\\", "/")
        if "autograd::Engine" in name or "/torch/autograd/" in filename or \
                "run_backward" in name or name == "backward":
            return "backward"
    for f in frames:
        if "/torch/optim/" in f["filename"].replace("\\", "/"):
            return "optimizer"
    return "forward"


def _block(b: Any, where: str) -> Optional[Dict[str, Any]]:
    if not isinstance(b, dict):
        raise SnapshotError(f"{where}: a block is {type(b).__name__}, not a dict")
    state = b.get("state")
    if state not in BLOCK_STATES:
        raise SnapshotError(f"{where}: unknown block state {state!r} (a snapshot version "
                            "this reader does not know)")
    size = _int(b, "size", where)
    address = _int(b, "address", where, 0)
    if "frames" in b:  # PyTorch 2.1 and later
        requested = _int(b, "requested_size", where)
        frames = _frames(b.get("frames"), where)
    elif "history" in b:  # PyTorch 2.0 and earlier (_block_extra_legacy)
        h = b["history"]
        if not isinstance(h, list) or not h or not isinstance(h[0], dict):
            raise SnapshotError(f"{where}: 'history' is not a list of dicts")
        requested = _int(h[0], "real_size", where)
        frames = _frames(h[0].get("frames"), where)
    else:
        requested = _int(b, "requested_size", where, size)
        frames = []
    if state == "inactive":
        return None
    return {"address": address, "size": size, "requested_size": requested, "state": state,
            "frame": user_frame(frames), "phase": phase_hint(frames)}


def convert(snapshot: Any, name: str = "") -> Dict[str, Any]:
    """The snapshot dict as actsim's snapshot JSON (a dict)."""
    if not isinstance(snapshot, dict):
        raise SnapshotError(f"not a snapshot: the pickle holds a {type(snapshot).__name__}, "
                            "not the dict torch.cuda.memory._snapshot() returns")
    if "segments" not in snapshot:
        raise SnapshotError("not a snapshot: no 'segments' (torch.cuda.memory._snapshot() "
                            "has them)")
    segments, traces = snapshot["segments"], snapshot.get("device_traces")
    if not isinstance(segments, list):
        raise SnapshotError("'segments' is not a list")
    if traces is None:
        raise SnapshotError("no 'device_traces': the history was not recorded (call "
                            "torch.cuda.memory._record_memory_history() before the step)")
    if not isinstance(traces, list) or not all(isinstance(t, list) for t in traces):
        raise SnapshotError("'device_traces' is not a list of lists")
    if not any(traces):
        raise SnapshotError("no device trace: every device's trace is empty (history not "
                            "recorded: call torch.cuda.memory._record_memory_history() before "
                            "the step)")
    layout = None
    devices: Dict[int, Dict[str, Any]] = {}

    def device(i: int) -> Dict[str, Any]:
        return devices.setdefault(i, {"index": i, "segments": [], "live": [], "trace": []})

    for si, s in enumerate(segments):
        where = f"segments[{si}]"
        if not isinstance(s, dict):
            raise SnapshotError(f"{where}: not a dict")
        blocks = s.get("blocks")
        if not isinstance(blocks, list):
            raise SnapshotError(f"{where}: no 'blocks' list")
        d = device(_int(s, "device", where, 0))
        address = _int(s, "address", where, 0)
        d["segments"].append({"address": address, "total_size": _int(s, "total_size", where),
                              "stream": _int(s, "stream", where, 0),
                              "segment_type": str(s.get("segment_type", ""))})
        for bi, b in enumerate(blocks):
            bw = f"{where}.blocks[{bi}]"
            if isinstance(b, dict):
                layout = layout or ("history" if "history" in b else
                                    "frames" if "frames" in b else None)
            entry = _block(b, bw)
            if entry is not None:
                d["live"].append(entry)

    for di, trace in enumerate(traces):
        d = device(di)
        for ei, e in enumerate(trace):
            where = f"device_traces[{di}][{ei}]"
            if not isinstance(e, dict):
                raise SnapshotError(f"{where}: not a dict")
            action = e.get("action")
            if action not in ACTIONS:
                raise SnapshotError(f"{where}: unknown action {action!r} (a snapshot version "
                                    "this reader does not know)")
            frames = _frames(e.get("frames"), where)
            t = e.get("time_us")
            d["trace"].append({
                "action": action,
                "addr": _int(e, "addr", where, 0),
                "size": _int(e, "size", where, 0),
                "stream": _int(e, "stream", where, 0),
                "time_us": t if isinstance(t, int) and not isinstance(t, bool) else None,
                "frame": user_frame(frames),
                "phase": phase_hint(frames),
            })
            if "time_us" in e:
                layout = layout or "frames"
    return {"format": FORMAT, "version": VERSION, "file": name,
            "layout": layout or "unknown",
            "devices": [devices[k] for k in sorted(devices)]}


def read(path: str) -> Dict[str, Any]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise SnapshotError(f"cannot read ({e.strerror})") from None
    return convert(load_pickle(data), path)


def main(argv: List[str]) -> int:
    args = argv[1:]
    out_path = None
    if len(args) == 3 and args[1] == "-o":
        out_path = args[2]
        args = args[:1]
    if len(args) != 1:
        print("usage: snapshot.py FILE.pickle [-o FILE.json]", file=sys.stderr)
        return 2
    try:
        text = json.dumps(read(args[0]), separators=(",", ":"))
    except SnapshotError as e:
        print(f"{args[0]}: {e}", file=sys.stderr)
        return 2
    if out_path is None:
        sys.stdout.write(text + "\n")
    else:
        with open(out_path, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""Snapshot pickles of the structure torch/cuda/memory.py documents for _snapshot(), written
without torch, with peaks known by construction; and hostile pickles that must be refused.

Run as a script to write them into a folder: python3 snapshot_fixtures.py OUT_DIR
"""

import io
import os
import pickle
import sys

MiB = 1 << 20

USER = {"filename": "/home/u/train/model.py", "line": 42, "name": "forward"}
USER_MLP = {"filename": "/home/u/train/model.py", "line": 57, "name": "mlp"}
TORCH_LINEAR = {"filename": "/usr/lib/python3/dist-packages/torch/nn/modules/linear.py",
                "line": 114, "name": "forward"}
CPP = {"filename": "??", "line": 0, "name": "at::native::empty_cuda"}
ENGINE = {"filename": "??", "line": 0, "name": "torch::autograd::Engine::evaluate_function"}
BACKWARD = {"filename": "/usr/lib/python3/dist-packages/torch/autograd/__init__.py",
            "line": 200, "name": "backward"}
TRAIN = {"filename": "/home/u/train/train.py", "line": 10, "name": "step"}
ADAM = {"filename": "/usr/lib/python3/dist-packages/torch/optim/adam.py", "line": 300,
        "name": "_multi_tensor_adam"}


def _frames(*fs):
    return [dict(f) for f in fs]


class Builder:
    """A device trace with the state it leaves, in the layout of PyTorch >= 2.1 ("frames") or of
    2.0 ("history", no times)."""

    def __init__(self, legacy=False):
        self.legacy = legacy
        self.trace = []
        self.t = 1_000_000
        self.segments = {}  # address -> total_size
        self.blocks = {}    # address -> (size, requested, frames)

    def _entry(self, action, addr, size, frames):
        e = {"action": action, "addr": addr, "size": size, "stream": 0,
             "frames": frames}
        if not self.legacy:
            e["time_us"] = self.t
            e["pool_id"] = (0, 0)
        self.t += 100
        self.trace.append(e)

    def segment(self, addr, size):
        self._entry("segment_alloc", addr, size, [])
        self.segments[addr] = size

    def alloc(self, addr, size, frames):
        self._entry("alloc", addr, size, frames)
        self.blocks[addr] = (size, frames)

    def free(self, addr):
        size, frames = self.blocks.pop(addr)
        self._entry("free_requested", addr, size, frames)
        self._entry("free_completed", addr, size, frames)

    def pickle(self, pre_trace_blocks=(), protocol=4):
        """pre_trace_blocks: (address, block size, requested, frames) live since before the
        trace, inside a segment that was also there before it."""
        segments = []
        all_blocks = dict(self.blocks)
        for addr, size, requested, frames in pre_trace_blocks:
            all_blocks[addr] = (requested, frames)
        for seg_addr, seg_size in sorted(self.segments.items()):
            blocks = []
            for addr, (requested, frames) in sorted(all_blocks.items()):
                if seg_addr <= addr < seg_addr + seg_size:
                    size = next((s for a, s, r, f in pre_trace_blocks if a == addr),
                                (requested + 511) // 512 * 512)
                    b = {"address": addr, "size": size, "state": "active_allocated"}
                    if self.legacy:
                        b["history"] = [{"addr": addr, "real_size": requested, "frames": frames}]
                    else:
                        b["requested_size"] = requested
                        b["frames"] = frames
                    blocks.append(b)
            segments.append({"device": 0, "address": seg_addr, "total_size": seg_size,
                             "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
                             "allocated_size": sum(b["size"] for b in blocks),
                             "active_size": sum(b["size"] for b in blocks), "blocks": blocks})
        snap = {"segments": segments, "device_traces": [self.trace]}
        if not self.legacy:
            snap["allocator_settings"] = {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1}
        return pickle.dumps(snap, protocol=protocol)


def training_step(legacy=False):
    """A small step: 64 MiB of weights allocated before the trace (in a 256 MiB segment that
    existed before it), a forward of three activations, a backward that frees them while it
    allocates gradients, and an optimizer temporary. Returns (pickle bytes, expected figures)."""
    b = Builder(legacy)
    seg0 = 0x7F0000000000
    weights = (seg0, 64 * MiB, 64 * MiB, _frames(CPP, TORCH_LINEAR, USER))
    b.segments[seg0] = 256 * MiB  # before the trace
    a1, a2, a3 = seg0 + 64 * MiB, seg0 + 96 * MiB, seg0 + 160 * MiB
    b.alloc(a1, 32 * MiB, _frames(CPP, TORCH_LINEAR, USER))       # event 0
    b.alloc(a2, 64 * MiB, _frames(CPP, USER_MLP, TRAIN))          # event 1
    seg1 = 0x7F1000000000
    b.segment(seg1, 128 * MiB)                                    # event 2
    b.alloc(a3, 48 * MiB + 100, _frames(CPP, TORCH_LINEAR, USER))  # event 3: allocated peak
    b.free(a2)                                                    # events 4, 5 (backward)
    b.trace[-2]["frames"] = b.trace[-1]["frames"] = _frames(ENGINE, BACKWARD, TRAIN)
    g1 = seg1
    b.alloc(g1, 40 * MiB, _frames(ENGINE, BACKWARD, TRAIN))       # event 6
    b.free(a1)                                                    # events 7, 8
    b.free(a3)                                                    # events 9, 10
    b.alloc(seg1 + 40 * MiB, 8 * MiB, _frames(CPP, ADAM, TRAIN))  # event 11 (optimizer)
    b.free(seg1 + 40 * MiB)                                       # events 12, 13
    data = b.pickle(pre_trace_blocks=[weights])
    rounded_a3 = (48 * MiB + 100 + 511) // 512 * 512
    expected = {
        "start_allocated_bytes": 64 * MiB,
        "start_reserved_bytes": 256 * MiB,
        "peak_allocated_bytes": 64 * MiB + 32 * MiB + 64 * MiB + rounded_a3,
        "peak_requested_bytes": 64 * MiB + 32 * MiB + 64 * MiB + 48 * MiB + 100,
        "peak_reserved_bytes": 384 * MiB,
        "allocated_event": 3,
        "reserved_event": 2,
        "largest_at_peak": [
            (64 * MiB, "/home/u/train/model.py:42:forward"),  # the weights, before the trace
            (64 * MiB, "/home/u/train/model.py:57:mlp"),
            (rounded_a3, "/home/u/train/model.py:42:forward"),
            (32 * MiB, "/home/u/train/model.py:42:forward"),
        ],
    }
    return data, expected


def json_to_pickle(json_path, pickle_path):
    """A snapshot written as JSON (actsim-snapshot-gen) pickled as _dump_snapshot pickles it."""
    import json
    with open(json_path) as f:
        snap = json.load(f)
    with open(pickle_path, "wb") as f:
        pickle.dump(snap, f)


def no_history():
    """A snapshot taken without _record_memory_history: segments, no device_traces."""
    return pickle.dumps({"segments": [], "device_traces": [[]]})


def unknown_action():
    b = Builder()
    b.alloc(0x1000, 4096, [])
    b.trace[0]["action"] = "teleport"
    return b.pickle()


class _System:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


def _persistent():
    class P(pickle.Pickler):
        def persistent_id(self, obj):
            return "storage0" if obj == "ref" else None
    buf = io.BytesIO()
    P(buf, protocol=4).dump({"segments": "ref", "device_traces": []})
    return buf.getvalue()


def hostile():
    """Pickles that would run code (or are broken) if loaded naively: name -> bytes."""
    out = {}
    out["reduce_os_system_p2"] = pickle.dumps(_System(), protocol=2)       # GLOBAL + REDUCE
    out["reduce_os_system_p4"] = pickle.dumps(_System(), protocol=4)       # STACK_GLOBAL
    out["reduce_os_system_p0"] = pickle.dumps(_System(), protocol=0)       # text protocol
    # INST opcode (protocol 0): instantiate os.system-like callables by name.
    out["inst"] = b"(S'touch PWNED'\nios\nsystem\n."
    # A snapshot dict whose nested value runs code.
    out["nested_reduce"] = pickle.dumps({"segments": [], "device_traces": [[{"action": _System()}]]},
                                        protocol=4)
    good, _ = training_step()
    out["truncated"] = good[: len(good) // 2]
    out["empty"] = b""
    out["not_a_pickle"] = b"segments,device_traces\n1,2\n"
    out["deep_nesting"] = b"\x80\x04" + b"]" * 200_000 + b"."  # EMPTY_LIST without APPENDs
    out["persistent_id"] = _persistent()
    out["list"] = pickle.dumps([1, 2, 3])
    return out


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    files = {"training_step.pickle": training_step()[0],
             "training_step_legacy.pickle": training_step(legacy=True)[0],
             "no_history.pickle": no_history(), "unknown_action.pickle": unknown_action()}
    for name, data in hostile().items():
        files[f"hostile_{name}.pickle"] = data
    for name, data in files.items():
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main(sys.argv[1])

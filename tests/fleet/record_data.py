"""Record the real ETDumps under ``tests/data/fleet_rec/`` once: small models, several runtime processes each.

``python tests/fleet/record_data.py [OUT]`` (default ``tests/data/fleet_rec``; run it on a quiet machine: the
checked-in timings are what tests/fleet/test_recorded.py judges, with effects planted by transforming them).

Everything but the timings is deterministic: the models (seeded weights), their inputs, the lowering (real
ExecuTorch toolchain, portable kernels: every operator is its own timed event with a debug handle; the
``.pte`` files are byte-identical from one recording to the next, their sha256 is in the manifest), the file
names, the manifest and the order in which the processes run. The one exception besides the timings: the
ETRecord holds ``graph_id`` values that are Python object ids (memory addresses) of the exporting process.

Each process is a fork of one driver interpreter that loads the program from its bytes, runs it :data:`RUNS`
times and writes one ETDump (as ``make_replicas.py`` does), so each file is one process — the unit of
replication of ``etlens compare``. The roles of a model run interleaved (process 0 of every role, then
process 1 …), so a drift of the machine's load hits them alike.

Models (weights kept small so the ``.etrecord`` files stay small; batch sizes keep the ops above the
verdict's ``min_delta_ms``):

- ``mlp``: 3 x (Linear 48 -> 48, ReLU) then ``head`` = Linear 48 -> 40, input 256 x 48. Roles ``A`` and ``B``
  run build ``same`` (the same ``.pte``), role ``P`` build ``slow`` whose head has 52 outputs (1.3x its work).
- ``net``: the fleet's shape: ``inp`` Linear 32 -> 32, ``block`` = Linear 32 -> W, ReLU, Linear W -> 32, then
  ``out`` Linear 32 -> 16, input 128 x 32. Role ``n``: W = 8; role ``n+1``: W = 128 (block does 16x the work).
- ``cnn``: Conv 3 -> 8 (3x3), ReLU, max-pool, Conv 8 -> 8, ReLU, ``fc`` Linear, input 1 x 3 x 24 x 24. Roles
  ``A`` and ``B``, the same build.

Stored small: the ETDumps gzipped (``*.etdp.gz``), the ETRecords re-zipped deflated with a fixed timestamp
(same entries and bytes inside), weights and inputs made of a few random rows repeated (so they compress;
the portable kernels' timings do not depend on the values); the ``.pte`` files are not kept (the manifest
has their sha256). ``OUT/manifest.json``: ``{"builds": {model/build: {pte_sha256, etrecord}}, "dumps":
[{etdump, model, role, build, process, etrecord}]}`` with paths relative to OUT, and the machine it was
recorded on.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import platform
import shutil
import sys
import tempfile
import zipfile

#: runs per process, processes per role
RUNS = 8
PROCS = {"mlp": 5, "net": 4, "cnn": 5}
#: model -> {role: build}
ROLES = {"mlp": {"A": "same", "B": "same", "P": "slow"}, "net": {"n": "n", "n+1": "n+1"},
         "cnn": {"A": "same", "B": "same"}}


def make_model(model: str, build: str):
    """``(module, example inputs)`` of one build of one model, seeded."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    if model == "mlp":
        head = {"same": 40, "slow": 52}[build]

        class Mlp(nn.Module):
            def __init__(self):
                super().__init__()
                self.l1, self.l2, self.l3 = nn.Linear(48, 48), nn.Linear(48, 48), nn.Linear(48, 48)
                self.head = nn.Linear(48, head)

            def forward(self, x):
                return self.head(torch.relu(self.l3(torch.relu(self.l2(torch.relu(self.l1(x)))))))

        net, shape = Mlp(), (256, 48)
    elif model == "net":
        width = {"n": 8, "n+1": 128}[build]

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.inp = nn.Linear(32, 32)
                self.block = nn.Sequential(nn.Linear(32, width), nn.ReLU(), nn.Linear(width, 32))
                self.out = nn.Linear(32, 16)

            def forward(self, x):
                return self.out(torch.relu(self.block(torch.relu(self.inp(x)))))

        net, shape = Net(), (128, 32)
    else:
        class Cnn(nn.Module):
            def __init__(self):
                super().__init__()
                self.c1, self.c2 = nn.Conv2d(3, 8, 3), nn.Conv2d(8, 8, 3)
                self.pool = nn.MaxPool2d(2)
                self.fc = nn.Linear(8 * 9 * 9, 10)

            def forward(self, x):
                x = torch.relu(self.c2(self.pool(torch.relu(self.c1(x)))))
                return self.fc(x.flatten(1))

        net, shape = Cnn(), (1, 3, 24, 24)
    _tile(net)
    torch.manual_seed(1)
    # a few distinct rows (images: channels) repeated: the ETRecord stores the inputs three times, and tiled
    # values compress; the portable kernels' timings do not depend on the values
    x = torch.randn(8, *shape[1:]).repeat(shape[0] // 8, *([1] * (len(shape) - 1))) if shape[0] >= 8 else \
        torch.randn(*shape[:2], 4, shape[-1]).repeat(1, 1, shape[2] // 4, 1)
    return net.eval(), (x,)


def _tile(net) -> None:
    """Make every weight matrix 4 seeded random rows repeated (the ETRecord holds the weights twice)."""
    import torch

    with torch.no_grad():
        for p in net.parameters():
            if p.dim() >= 2 and p.shape[0] > 4:
                p.copy_(p[:4].repeat(p.shape[0] // 4 + 1, *([1] * (p.dim() - 1)))[: p.shape[0]])


def _rezip(src: str, dst: str) -> None:
    """Copy a zip (the ETRecord) entry by entry, deflated, with a fixed timestamp: same entries, same bytes
    inside, but small and the same file every time (ExecuTorch writes them stored, stamped with the time)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zout:
        for info in zin.infolist():
            zout.writestr(zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0)), zin.read(info),
                          compress_type=zipfile.ZIP_DEFLATED)


def lower(out: str, programs: str) -> dict:
    """Lower every (model, build) with the real toolchain: the ``.pte`` into ``programs`` (not checked in: the
    tests only need the ETRecord; its sha256 goes in the manifest), the ``.etrecord`` into ``out``."""
    from etlens.builder.pipeline import build_and_run

    builds = {}
    for model, roles in ROLES.items():
        for build in dict.fromkeys(roles.values()):
            net, inp = make_model(model, build)
            stem = f"{model}_{build.replace('+', 'p')}"
            with tempfile.TemporaryDirectory(prefix="etlens-rec-") as tmp:
                arts = build_and_run(net, inp, tmp, name="net", backend="portable", runs=1)
                shutil.copy(arts.pte, os.path.join(programs, stem + ".pte"))
                _rezip(arts.etrecord, os.path.join(out, stem + ".etrecord"))
            with open(os.path.join(programs, stem + ".pte"), "rb") as f:
                sha = hashlib.sha256(f.read()).hexdigest()
            builds[f"{model}/{build}"] = {"pte": stem + ".pte", "pte_sha256": sha, "etrecord": stem + ".etrecord"}
    return builds


def drive(out: str, programs: str, builds: dict) -> list[dict]:
    """Fork one process per (model, process index, role), interleaved; each runs :data:`RUNS` times and its
    ETDump is stored gzipped (``*.etdp.gz``: 4x smaller; the tests unpack them)."""
    import torch
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    dumps = []
    for model, roles in ROLES.items():
        ptes = {b: open(os.path.join(programs, builds[f"{model}/{b}"]["pte"]), "rb").read()
                for b in set(roles.values())}
        _, inp = make_model(model, next(iter(roles.values())))
        for k in range(PROCS[model]):
            for role, build in roles.items():
                name = f"{model}_{role.replace('+', 'p')}_{k}.etdp"
                pid = os.fork()
                if pid == 0:   # the process: load, run, dump, leave without the parent's atexit hooks
                    code = 1
                    try:
                        m = _load_for_executorch_from_buffer(ptes[build], enable_etdump=True,
                                                             debug_buffer_size=0)
                        for _ in range(RUNS):
                            m.forward(list(inp))
                        m.write_etdump_result_to_file(os.path.join(programs, name))
                        code = 0
                    finally:
                        os._exit(code)
                _, status = os.waitpid(pid, 0)
                if status:
                    raise RuntimeError(f"{name}: the runtime process failed (wait status {status})")
                with open(os.path.join(programs, name), "rb") as f, \
                        gzip.GzipFile(os.path.join(out, name + ".gz"), "wb", 9, mtime=0) as g:
                    g.write(f.read())
                dumps.append({"etdump": name + ".gz", "model": model, "role": role, "build": build, "process": k,
                              "etrecord": builds[f"{model}/{build}"]["etrecord"]})
    del torch
    return dumps


def main(out: str) -> dict:
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):   # a fresh recording replaces the old one
        if f.endswith((".etdp.gz", ".etrecord", "manifest.json")):
            os.remove(os.path.join(out, f))
    with tempfile.TemporaryDirectory(prefix="etlens-rec-programs-") as programs:
        builds = lower(out, programs)
        # the runs happen in a fresh interpreter that imported only the runtime (no lowering state around)
        import subprocess

        with open(os.path.join(programs, "builds.json"), "w") as f:
            json.dump(builds, f)
        proc = subprocess.run([sys.executable, __file__, "--drive", out, programs], capture_output=True, text=True)
        if proc.returncode:
            raise RuntimeError(f"driver failed:\n{proc.stderr[-3000:]}")
        dumps = json.loads(proc.stdout.strip().splitlines()[-1])
    for b in builds.values():
        del b["pte"]
    manifest = {"builds": builds, "dumps": dumps, "runs": RUNS, "procs": PROCS, "roles": ROLES,
                "recorded_on": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"}
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    return manifest


if __name__ == "__main__":
    if sys.argv[1:2] == ["--drive"]:   # OUT PROGRAMS: the runtime processes of the lowered builds
        with open(os.path.join(sys.argv[3], "builds.json")) as f:
            res = drive(sys.argv[2], sys.argv[3], json.load(f))
        sys.stdout.write("\n" + json.dumps(res) + "\n")
    else:
        main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                                  "data", "fleet_rec"))

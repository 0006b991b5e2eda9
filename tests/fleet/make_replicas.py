"""Real repeated processes for the compare statistics: one program in two builds, many processes each.

Run as a script (``python tests/fleet/make_replicas.py OUT GROUPS RUNS [DRIVERS [REPS]]``). It lowers one model with
the real ExecuTorch toolchain (portable kernels: every operator is its own timed event), twice:

- ``same`` — the model as is (lowering it again writes a byte-identical ``.pte``, so "two builds of the
  same program" are the same bytes; the A and B sides of a same-build comparison are different processes);
- ``slow`` — the head layer (``head``, the last ``Linear``) has :data:`PLANT` x the output features, so its
  two operators (the weight's ``permute_copy`` and the ``addmm``) really do 1.3x the work and the model's
  output gets wider; every other operator has the same shapes, weights and inputs.

Then it runs the programs in separate runtime processes, ``RUNS`` runs and one ETDump each. A *group* is one
process per role — ``A`` (same), ``B`` (same), ``P`` (slow) — and the roles of a group run back to back, so a
drift of the machine's load hits every role alike, as a device farm that alternates builds would.
``DRIVERS`` fresh interpreters (default 1) run one after the other; each imports the runtime once and forks
``REPS`` (default 1) processes per role of every group (see :func:`drive`), so a group has DRIVERS x REPS
processes a role, from as many different interpreters as there are drivers.
``OUT/manifest.json``: ``{"builds": {name: {pte, etrecord, head}}, "dumps": [{etdump, role, build, group,
driver, etrecord}]}``.
"""

from __future__ import annotations

import json
import os
import sys

#: the planted slowdown: the head's output features (and so its work) grow by this factor
PLANT = 1.3
HEAD = 100
BUILDS = {"same": HEAD, "slow": round(HEAD * PLANT)}
#: role -> build: A and B are two process sets of the same build, P the planted slowdown
ROLES = {"A": "same", "B": "same", "P": "slow"}


def make_model(head: int):
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = nn.Linear(128, 128)
            self.l2 = nn.Linear(128, 128)
            self.l3 = nn.Linear(128, 128)
            self.head = nn.Linear(128, head)

        def forward(self, x):
            x = torch.relu(self.l1(x))
            x = torch.relu(self.l2(x))
            x = torch.relu(self.l3(x))
            return self.head(x)

    torch.manual_seed(0)
    net = Net().eval()
    return net, (torch.randn(16, 128),)


def lower(out: str) -> dict:
    """Lower every build (real toolchain, a child each); ``{name: {pte, etrecord, head}}``."""
    from etlens.builder.pipeline import build_and_run

    builds = {}
    for name, head in BUILDS.items():
        model, inp = make_model(head)
        arts = build_and_run(model, inp, os.path.join(out, name), name="net", backend="portable", runs=1)
        builds[name] = {"pte": arts.pte, "etrecord": arts.etrecord, "head": head}
    return builds


def drive(builds: dict, out: str, groups: int, runs: int, driver: int = 0, reps: int = 1) -> list[dict]:
    """Run ``reps`` processes per role of every group; ``driver`` names the files. Returns the manifest entries.

    This process imports the runtime once (seconds of CPU) and forks one child per (group, role): each child
    loads the program from its bytes, runs it ``runs`` times, writes its ETDump and exits. The children are
    separate processes (own heap, own program load and memory plan); they share this driver's shared-library
    layout (address randomisation happens at exec, not fork) — which is why several drivers can share a job.
    """
    import torch
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

    programs = {name: open(b["pte"], "rb").read() for name, b in builds.items()}
    torch.manual_seed(0)
    x = torch.randn(16, 128)
    dumps = []
    for g in range(groups):
        for rep, (role, name) in ((r, x) for r in range(reps) for x in ROLES.items()):
            path = os.path.join(out, "dumps", f"{role}_g{g:03d}_d{driver}_r{rep}.etdp")
            pid = os.fork()
            if pid == 0:  # the replicate: load, run, dump, leave without running the parent's atexit hooks
                code = 1
                try:
                    m = _load_for_executorch_from_buffer(programs[name], enable_etdump=True, debug_buffer_size=0)
                    for _ in range(runs):
                        m.forward([x])
                    m.write_etdump_result_to_file(path)
                    code = 0
                finally:
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
            if status != 0:
                raise RuntimeError(f"replicate {role} #{rep} of group {g} failed (wait status {status})")
            dumps.append({"etdump": path, "role": role, "build": name, "group": g, "driver": driver,
                          "etrecord": builds[name]["etrecord"]})
    return dumps


def build(out: str, groups: int, runs: int, drivers: int = 1, reps: int = 1) -> dict:
    """Lower the builds, then run ``drivers`` fresh driver interpreters one after the other."""
    import subprocess

    builds = lower(out)
    os.makedirs(os.path.join(out, "dumps"), exist_ok=True)
    with open(os.path.join(out, "builds.json"), "w") as f:
        json.dump(builds, f)
    dumps: list = []
    for d in range(drivers):
        proc = subprocess.run([sys.executable, __file__, "--drive", out, str(groups), str(runs), str(d), str(reps)],
                              capture_output=True, text=True)
        if proc.returncode:
            raise RuntimeError(f"driver {d} failed:\n{proc.stderr[-3000:]}")
        dumps += json.loads(proc.stdout.strip().splitlines()[-1])
    manifest = {"builds": builds, "dumps": dumps, "plant": PLANT, "groups": groups, "runs": runs,
                "drivers": drivers, "reps": reps}
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return manifest


if __name__ == "__main__":
    if sys.argv[1] == "--drive":   # OUT GROUPS RUNS DRIVER REPS: one driver's processes of the lowered builds
        out = sys.argv[2]
        with open(os.path.join(out, "builds.json")) as f:
            res = drive(json.load(f), out, int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
        sys.stdout.write("\n" + json.dumps(res) + "\n")
    else:
        os.makedirs(sys.argv[1], exist_ok=True)
        extra = [int(v) for v in sys.argv[4:6]]
        build(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), *extra)

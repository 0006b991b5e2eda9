"""The ``.pte`` reader works with every ``executorch`` import blocked (and without torch)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

_BLOCKER = textwrap.dedent("""
    import importlib.abc, sys

    class _Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "executorch" or name.startswith("executorch."):
                raise ImportError(f"blocked import of {name}")
            return None

    sys.meta_path.insert(0, _Block())
""")


def _run(code: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", _BLOCKER + textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_pte_reader_without_executorch(committed):
    out = _run(f"""
        import json, sys
        try:
            import executorch  # noqa: F401
            blocked = False
        except ImportError:
            blocked = True
        from etlens.readers import read
        res = {{"blocked": blocked}}
        paths = {{"xnn": {committed["mlp_xnnpack"].pte!r}, "port": {committed["mlp_portable"].pte!r}}}
        for case, path in paths.items():
            art = read(path)
            s = art.summary()
            m = s["methods"][0]
            res[case] = {{"name": m["name"], "n": m["num_instructions"], "ops": m["operators"],
                          "delegates": [(d["backend_id"], d["ops"]) for d in m["delegates"]],
                          "nodes": len(art.graphs()["forward"].lint())}}
        res["executorch_loaded"] = sorted(k for k in sys.modules if k.startswith("executorch"))
        res["torch_loaded"] = "torch" in sys.modules
        print(json.dumps(res))
    """)
    assert out["blocked"] is True
    assert out["executorch_loaded"] == []
    assert out["xnn"]["name"] == "forward" and out["xnn"]["n"] == 1
    assert out["xnn"]["delegates"] == [["XnnpackBackend", ["XNNFullyConnected", "XNNFullyConnected", "XNNAdd"]]]
    assert out["port"]["ops"] == ["aten::permute_copy.out", "aten::addmm.out", "aten::relu.out", "aten::add.out"]
    assert out["port"]["nodes"] > 6
    # Reading a .pte needs neither ExecuTorch nor torch.
    assert out["torch_loaded"] is False


def test_cli_info_without_executorch(committed):
    out = _run(f"""
        import contextlib, io, json
        from etlens.cli.main import main
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = main(["info", {committed["mlp_xnnpack"].pte!r}, "--json"])
        data = json.loads(buf.getvalue())
        backend = data["methods"][0]["delegates"][0]["backend_id"]
        print(json.dumps({{"rc": rc, "format": data["format"], "backend": backend}}))
    """)
    assert out == {"rc": 0, "format": "pte", "backend": "XnnpackBackend"}

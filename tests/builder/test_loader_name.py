"""A user's model file is imported under a name that is the same in every process (``build/loader.py``).

The name shows in traces (module paths, stack frames); ``trace --no-times`` promises byte-identical output
for one model, which Python's per-process string ``hash()`` broke for every ``--model FILE.py``.
"""

from __future__ import annotations

import subprocess
import sys


def _name_in_fresh_process(path: str) -> str:
    code = ("import sys; from etlens.builder.loader import _import_file; "
            "print(_import_file(sys.argv[1]).__name__)")
    out = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_module_name_is_stable_across_processes(tmp_path):
    model = tmp_path / "m.py"
    model.write_text("X = 1\n")
    other = tmp_path / "n.py"
    other.write_text("X = 2\n")
    a, b = _name_in_fresh_process(str(model)), _name_in_fresh_process(str(model))
    assert a == b and a.startswith("_etlens_user_")
    assert _name_in_fresh_process(str(other)) != a

"""The generated FlatBuffer descriptions (src/etlens/schema/*_fbs.py) match the installed ExecuTorch's .fbs files."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from etlens.schema import SCALAR_TYPES, VALUE_KINDS
from etlens.schema.etdump_fbs import ProfileEvent
from etlens.schema.program_fbs import KernelTypes, Tensor
from etlens.schema.scalar_type_fbs import ScalarType

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_generated_schema_is_up_to_date():
    if importlib.util.find_spec("executorch") is None:
        pytest.skip("executorch is not installed")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gen_schema.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_fields_know_slot_type_and_default():
    assert ProfileEvent.start_time.slot == 6 and ProfileEvent.start_time.fmt == "Q"
    assert ProfileEvent.instruction_id.default == -1
    assert Tensor.sizes.kind == "vector" and Tensor.sizes.fmt == "i"
    assert [f.slot for f in Tensor.FIELDS] == list(range(len(Tensor.FIELDS)))


def test_one_scalar_type_table_covers_the_schema_enum():
    assert set(ScalarType.NAMES) <= set(SCALAR_TYPES)
    assert all(SCALAR_TYPES[code].name == name for code, name in ScalarType.NAMES.items())
    assert VALUE_KINDS[KernelTypes.Tensor] == "tensor" and VALUE_KINDS[KernelTypes.OptionalTensorList] == \
        "optional_tensor_list"

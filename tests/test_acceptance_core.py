"""The seed programs of issue 2 run unchanged and print OK."""
import os
import subprocess
import sys

import pytest

from conftest import ROOT, SHARED


@pytest.mark.parametrize("program", ["s000_basic.py", "s000_control_flow.py", "s002_torch_style.py"])
def test_seed_program_prints_ok(program):
    folder = os.path.join(SHARED, "acceptance")
    if not os.path.exists(os.path.join(folder, program)):
        pytest.skip(f"{program} not found in {folder}")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, program], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert proc.stdout.strip().splitlines()[-1].endswith("OK"), proc.stdout[-500:]

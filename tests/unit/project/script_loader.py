"""Load a file of ``scripts/`` as a module (scripts are not a package), for the tests of those scripts."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parents[3] / "scripts"


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` as module ``<name>_script``, registered in ``sys.modules`` (dataclasses resolve their
    module by name)."""
    spec = importlib.util.spec_from_file_location(f"{name}_script", SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[f"{name}_script"] = mod
    spec.loader.exec_module(mod)
    return mod

"""Load a module of bootstrap/ or .github/ by its path: they are separate projects, not packages."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_module(name: str, path: Path) -> ModuleType:
    """The module at `path`, or the package whose folder `path` is."""
    spec = (importlib.util.spec_from_file_location(name, path / "__init__.py", submodule_search_locations=[str(path)])
            if path.is_dir() else importlib.util.spec_from_file_location(name, path))
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    # Registered first, as an import would: dataclasses look their module up while the class is made.
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module

"""Test actors, one module per area. This package is the test app's ``actors`` module, so
autodiscovery imports it; every submodule is imported here so its actors register."""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

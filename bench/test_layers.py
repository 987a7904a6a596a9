"""bench/hwbench's modules import only the ones below them, in the order its package doc
lists them (errors and parsers at the bottom, main at the top), so that the package reads
bottom-up and no two modules import each other."""

from __future__ import annotations

import ast
import unittest
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent / "hwbench"

# Bottom to top, as hwbench/__init__.py describes them.
LAYERS = ("errors", "parsers", "records", "processes", "watchdog", "probes", "plans", "context",
          "brokers", "clusters", "tools", "sessions", "figures", "report", "main", "standalone",
          "__main__")


def package_imports(source: str) -> set[str]:
    """The hwbench modules a module's source imports (relatively or by name)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.level == 1 or
                                                 (node.module or "").startswith("hwbench")):
            module = (node.module or "").removeprefix("hwbench").lstrip(".")
            found.update([module] if module else [a.name for a in node.names])
    return found


def upward_imports(layers: tuple[str, ...], sources: dict[str, str]) -> list[str]:
    return [f"{name} imports {imported}" for name, source in sources.items()
            for imported in package_imports(source)
            if imported not in layers[:layers.index(name)]]


class Layers(unittest.TestCase):
    def test_every_module_has_a_layer(self):
        modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
        self.assertEqual(modules, set(LAYERS))

    def test_no_module_imports_one_above_it(self):
        sources = {name: (PACKAGE / f"{name}.py").read_text() for name in LAYERS}
        self.assertEqual(upward_imports(LAYERS, sources), [])

    def test_the_check_sees_an_upward_import(self):
        sources = {"errors": "from .records import Session\n",
                   "records": "from . import errors\nfrom hwbench.errors import BenchError\n"}
        self.assertEqual(upward_imports(("errors", "records"), sources),
                         ["errors imports records"])


if __name__ == "__main__":
    unittest.main()

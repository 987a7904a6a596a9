"""Every name the benchmark's code reads is defined (imported, assigned or built in), in each
bench/*.py script and each module of the bench/hwbench package: a missing import otherwise
shows only when its phase runs, minutes into a benchmark."""

import ast
import builtins
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent


def undefined_names(source: str) -> set[str]:
    tree = ast.parse(source)
    defined = set(dir(builtins)) | {"__file__"}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            defined.add(node.id)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            defined.add(node.name)
    read = {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }
    return read - defined


def bench_sources() -> list[Path]:
    """The bench scripts and every module of the hwbench package."""
    return sorted(HERE.glob("*.py")) + sorted((HERE / "hwbench").glob("*.py"))


class Names(unittest.TestCase):
    def test_a_missing_import_is_found(self):
        self.assertEqual(undefined_names("def f(t):\n    return re.sub('a', 'b', t)\n"), {"re"})
        self.assertEqual(undefined_names("import re\nre.sub('a', 'b', 'c')\n"), set())
        self.assertEqual(undefined_names("from .errors import BenchError\nraise BenchError()\n"),
                         set())

    def test_the_package_is_covered(self):
        names = {path.relative_to(HERE).as_posix() for path in bench_sources()}
        for module in ("dev.py", "hwbench/processes.py", "hwbench/sessions.py",
                       "hwbench/report.py", "hwbench/main.py"):
            self.assertIn(module, names)

    def test_every_bench_script_defines_what_it_reads(self):
        for source in bench_sources():
            with self.subTest(source=source.relative_to(HERE).as_posix()):
                self.assertEqual(undefined_names(source.read_text()), set())


if __name__ == "__main__":
    unittest.main()

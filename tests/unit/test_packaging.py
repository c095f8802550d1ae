"""What ``pip install .`` ships: the operator and its CLI, never the test bed (``testbed/``), and
neither moto (the test bed's fake AWS) nor matplotlib (the ``charts`` extra).

The wheel is built as pip builds it for ``pip install .`` and installed into a fresh virtualenv
by unpacking it (a pure wheel's installation); the operator's third-party dependencies are
reached through the project's own environment, whose editable installs stay inert there, so
only the wheel's modules can answer ``import acceltrial``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from tests.conftest import REPO

TEST_BED_PARTS = ("acceltrial_testbed/", "acceltrial/sandbox/", "acceltrial/demo/")
ALONE = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
"""The environment of the fresh virtualenv's python: no path of this checkout added to it."""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(REPO)],
        check=True,
        timeout=300,
    )
    (built,) = out.glob("acceltrial-*.whl")
    return built


def test_the_wheel_holds_no_module_of_the_test_bed(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()

    assert "acceltrial/handlers/__init__.py" in names
    assert "acceltrial/cli/main.py" in names
    assert "acceltrial/providers/pricing/catalog.yaml" in names
    shipped = [name for name in names if name.startswith(TEST_BED_PARTS)]
    assert shipped == [], "the test bed is installed with `pip install -e testbed/` only"


def test_neither_moto_nor_matplotlib_is_a_dependency_of_the_operator(wheel: Path) -> None:
    archive = zipfile.ZipFile(wheel)
    (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
    requires = Parser().parsestr(archive.read(metadata).decode()).get_all("Requires-Dist") or []
    unconditional = [r for r in requires if "extra ==" not in r]

    assert any(r.startswith("kopf") for r in unconditional)
    assert not [r for r in unconditional if r.startswith(("moto", "matplotlib"))], unconditional
    assert any(r.startswith("matplotlib") and 'extra == "charts"' in r for r in requires)


def installed(wheel: Path, where: Path) -> tuple[Path, Path]:
    """A fresh virtualenv with the wheel installed: its python and its site-packages."""
    venv.EnvBuilder(with_pip=False).create(where)
    python = where / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    )  # fmt: skip
    zipfile.ZipFile(wheel).extractall(site)
    # The dependencies from the project's environment, as a plain path: its .pth files (the
    # editable installs of acceltrial and of the test bed) are not run from there.
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python, site


def test_the_operator_imports_from_the_wheel_alone(wheel: Path, tmp_path: Path) -> None:
    python, site = installed(wheel, tmp_path / "venv")
    probe = (
        "import sys, importlib.util, acceltrial.handlers, acceltrial.cli.main\n"
        "print(acceltrial.handlers.__file__)\n"
        "loaded = sorted({m.split('.')[0] for m in sys.modules} & "
        "{'acceltrial_testbed', 'moto', 'matplotlib'})\n"
        "print(loaded, importlib.util.find_spec('acceltrial_testbed'))\n"
    )

    ran = subprocess.run(
        [str(python), "-c", probe], env=ALONE, check=False, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip

    assert ran.returncode == 0, ran.stderr
    where, loaded = ran.stdout.splitlines()
    assert where.startswith(str(site)), "acceltrial came from the wheel"
    assert loaded == "[] None", "no test bed, moto or matplotlib loaded, nor installed"


def test_without_the_test_bed_the_demo_says_how_to_install_it(wheel: Path, tmp_path: Path) -> None:
    python, _ = installed(wheel, tmp_path / "venv")

    ran = subprocess.run(
        [str(python), "-m", "acceltrial.cli.main", "demo", "--scenario", "promote"],
        env=ALONE, check=False, capture_output=True, text=True, timeout=120,
    )  # fmt: skip

    assert ran.returncode == 2
    assert "pip install -e testbed/" in ran.stderr
    assert "Traceback" not in ran.stderr

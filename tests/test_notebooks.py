"""The Colab notebooks in colab/: committed without outputs, and each runs top to bottom.

Every notebook is executed with nbclient in SMOKE mode (``KERAS_RELATIONAL_SMOKE=1`` shrinks
every run) by a kernel that is this interpreter (a throw-away ``python3`` kernelspec pointing at
``sys.executable``, found first through ``JUPYTER_PATH``), in a temporary working directory.
"""

import json
import pathlib
import re
import sys

import nbformat
import pytest

from keras_relational.experiments.devices import COLAB_GPU_HINT

COLAB_DIR = pathlib.Path(__file__).resolve().parents[1] / "colab"
NOTEBOOKS = sorted(COLAB_DIR.glob("*.ipynb"))
CELL_TIMEOUT = 600  # seconds per cell

# Appended to the in-memory copy of each notebook: proves the kernel is this interpreter.
_CHECK_CELL = "import sys\nimport keras_relational\nprint(sys.executable)"


def test_notebooks_exist():
    names = {path.name for path in NOTEBOOKS}
    assert "quickstart.ipynb" in names, names
    assert len(names) >= 2, names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_is_output_free(path):
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        assert cell.get("outputs") == [], f"{path.name}: code cell {index} has outputs"
        assert cell.get("execution_count") is None, (
            f"{path.name}: code cell {index} has an execution count")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_first_cell_reads_smoke(path):
    notebook = nbformat.read(path, as_version=4)
    first = next(cell for cell in notebook.cells if cell.cell_type == "code")
    assert 'os.environ.get("KERAS_RELATIONAL_SMOKE", "0") == "1"' in first.source
    assert '"google.colab" in sys.modules' in first.source
    assert first.source.rstrip().endswith("report_devices()"), first.source  # issue #23, 4


@pytest.fixture
def venv_kernel(tmp_path, monkeypatch):
    """A ``python3`` kernelspec running this interpreter, found before any other."""
    kernel_dir = tmp_path / "jupyter" / "kernels" / "python3"
    kernel_dir.mkdir(parents=True)
    spec = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (test)", "language": "python"}
    (kernel_dir / "kernel.json").write_text(json.dumps(spec))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("KERAS_RELATIONAL_SMOKE", "1")
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    work_dir = tmp_path / "cwd"
    work_dir.mkdir()
    return work_dir


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_executes(path, venv_kernel):
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(_CHECK_CELL))
    client = NotebookClient(notebook, kernel_name="python3", timeout=CELL_TIMEOUT,
                            resources={"metadata": {"path": str(venv_kernel)}})
    client.execute()
    # The first cell reports the backend and the device found; on a CPU, how to get a GPU.
    first = next(cell for cell in notebook.cells if cell.cell_type == "code")
    report = "".join(output.get("text", "") for output in first.outputs
                     if output.get("output_type") == "stream")
    assert re.search(r"^Keras [\d.]+, (tensorflow|jax|torch) backend: (no GPU found, running on "
                     r"the CPU \(\d+ cores\)|\d+ GPUs? found: .+)\.$", report, re.M), report
    assert (COLAB_GPU_HINT in report) == ("no GPU found" in report), report
    printed = "".join(output.get("text", "") for output in notebook.cells[-1].outputs
                      if output.get("output_type") == "stream")
    assert printed.strip() == sys.executable, printed
    # Nothing was written next to the notebooks.
    assert sorted(COLAB_DIR.glob("*.ipynb")) == NOTEBOOKS

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
    # TensorFlow's start-up lines (oneDNN, CUDA probing, absl's banner) are hidden everywhere.
    from keras_relational.experiments.console import HARMLESS_STDERR_LINES

    harmless = re.compile("|".join(f"(?:{p})" for p in HARMLESS_STDERR_LINES), re.M)
    for index, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []):
            text = output.get("text", "")
            assert not harmless.search(text), f"{path.name} cell {index}: {text[:500]}"
    # Nothing was written next to the notebooks.
    assert sorted(COLAB_DIR.glob("*.ipynb")) == NOTEBOOKS


# --- What each notebook installs on Colab ----------------------------------------------------
_PIP_LINE = re.compile(r'^\s*!pip install -q (--no-deps )?"?([^"\s]+)(?: @ git\+\{REPO_URL\})?"?',
                       re.M)


def install_lines(path):
    """The ``!pip install`` requirements of a notebook's setup cell, in order."""
    notebook = nbformat.read(path, as_version=4)
    first = next(cell for cell in notebook.cells if cell.cell_type == "code")
    return [match.group(2) for match in _PIP_LINE.finditer(first.source)]


def _imports_agents(path):
    notebook = nbformat.read(path, as_version=4)
    return any("keras_relational.agents" in cell.source for cell in notebook.cells
               if cell.cell_type == "code")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_installs_only_its_extras(path):
    """The quickstart installs the layers alone (on Colab's TensorFlow and matplotlib); only
    the notebooks that use TF-Agents install ``[rl]`` (gym 0.23 builds from source, and it
    replaces Colab's TensorFlow) and TF-Agents; the TensorFlow start-up lines are hidden."""
    lines = install_lines(path)
    assert lines and lines[0].startswith("keras-relational"), lines
    if path.stem == "quickstart":
        assert lines == ["keras-relational"], lines
    if _imports_agents(path):
        assert lines == ["keras-relational[rl]", "tf-agents==0.19.0"], lines
    else:
        assert "[rl]" not in lines[0] and "tf-agents==0.19.0" not in lines, lines
    notebook = nbformat.read(path, as_version=4)
    first = next(cell for cell in notebook.cells if cell.cell_type == "code")
    assert first.source.index("quiet_tensorflow_startup()") < first.source.index(
        "report_devices()")  # before the report imports Keras, and so TensorFlow


# Colab's runtime: Python 3.12 with TensorFlow preinstalled (2.19.0 when last checked); the
# notebooks that do not install [rl] keep it.
COLAB_PYTHON = "3.12"
COLAB_TENSORFLOW = "tensorflow==2.19.0"
# gym 0.23.0 (in [rl], imported by TF-Agents) is published as a source archive only: pip builds
# it on Colab (pure Python), but a resolver restricted to another Python's wheels cannot, so the
# [rl] check leaves it out.
_SOURCE_ONLY = ("gym",)


def _extra_requirements(extras):
    import configparser

    config = configparser.ConfigParser()
    config.read(COLAB_DIR.parent / "setup.cfg")
    lines = config["options"]["install_requires"].strip().splitlines()
    for extra in extras:
        lines += config["options.extras_require"][extra].strip().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")
            and re.split(r"[=<>!~\[ ;]", line.strip())[0] not in _SOURCE_ONLY]


def _dry_run(requirements, tmp_path):
    import subprocess
    import tempfile

    report = pathlib.Path(tempfile.mkdtemp(dir=tmp_path)) / "report.json"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
         "--python-version", COLAB_PYTHON, "--only-binary=:all:", "--report", str(report),
         *requirements], capture_output=True, text=True, timeout=1200)
    installed = {}
    if result.returncode == 0:
        with open(report) as f:
            installed = {item["metadata"]["name"].lower(): item["metadata"]["version"]
                         for item in json.load(f)["install"]}
    return result, installed


@pytest.mark.slow
@pytest.mark.subprocess
def test_notebook_install_cells_resolve_for_colab_python(tmp_path):
    """pip's resolver, for Python 3.12 wheels, on each notebook's install line: the layers and
    [envs] next to Colab's TensorFlow (kept as it is), [rl] with its own pins. Needs an index
    that serves TensorFlow for Python 3.12 (PyPI): the project's local mirror does not, so
    offline it skips, saying so."""
    probe, _ = _dry_run(["--no-deps", COLAB_TENSORFLOW], tmp_path)
    if probe.returncode != 0:
        pytest.skip(f"no index serves {COLAB_TENSORFLOW} for Python {COLAB_PYTHON} here "
                    f"(offline?): {probe.stderr.strip().splitlines()[-1:]}")
    import concurrent.futures

    lines = {tuple(install_lines(path)) for path in NOTEBOOKS}
    assert lines, NOTEBOOKS

    def resolve(line):
        extras = re.findall(r"\[([\w,]+)\]", line[0])
        extras = extras[0].split(",") if extras else []
        colab = [] if "rl" in extras else [COLAB_TENSORFLOW]
        return colab, _dry_run(_extra_requirements(extras) + colab, tmp_path)

    # The resolutions wait mostly on the index: side by side, not one after the other.
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(lines)) as pool:
        resolved = dict(zip(sorted(lines), pool.map(resolve, sorted(lines)), strict=True))
    for line, (colab, (result, installed)) in resolved.items():
        assert result.returncode == 0, (line, result.stderr[-3000:])
        if colab:  # Colab's TensorFlow stays
            assert installed.get("tensorflow") == COLAB_TENSORFLOW.split("==")[1], installed
        assert "keras" in installed, installed

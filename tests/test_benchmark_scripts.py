"""``tests/benchmark_scripts.py``: a benchmark script imported as its own run imports it (its
neighbours importable, once a process, under the name its neighbours use), the test process's
environment kept, and names that are not scripts refused."""

import os
import sys
import types

import benchmark_scripts
import pytest


@pytest.fixture
def scripts(tmp_path, monkeypatch):
    """A repository of fake scripts; ``sys.path`` and the imported modules are undone after."""
    folder = tmp_path / "benchmarks"
    folder.mkdir()
    monkeypatch.setattr(benchmark_scripts, "REPO_ROOT", str(tmp_path))
    monkeypatch.setattr(benchmark_scripts, "BENCHMARKS", str(folder))
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield folder
    for name in set(sys.modules) - before:
        del sys.modules[name]


def test_a_script_imports_its_neighbours_and_is_one_module_a_process(scripts):
    (scripts / "kr_fake_neighbour.py").write_text("VALUE = 3\n")
    (scripts / "kr_fake_script.py").write_text("import kr_fake_neighbour\n"
                                               "DOUBLED = 2 * kr_fake_neighbour.VALUE\n")
    script = benchmark_scripts.load("kr_fake_script")
    assert script.DOUBLED == 6
    assert script.__name__ == "kr_fake_script"
    assert benchmark_scripts.load("kr_fake_script") is script
    assert benchmark_scripts.load("kr_fake_neighbour") is script.kr_fake_neighbour
    assert sys.path[-2:] == [str(scripts), os.path.dirname(str(scripts))]  # after the rest


def test_a_script_run_with_dash_m_is_imported_under_the_benchmarks_package(scripts):
    (scripts / "kr_fake_helper.py").write_text("VALUE = 5\n")
    (scripts / "kr_fake_packaged.py").write_text("from benchmarks import kr_fake_helper\n")
    script = benchmark_scripts.load("kr_fake_packaged")
    assert script.__name__ == "benchmarks.kr_fake_packaged"
    assert script.kr_fake_helper is sys.modules["benchmarks.kr_fake_helper"]
    assert benchmark_scripts.load("kr_fake_packaged") is script


def test_the_environment_a_script_sets_for_its_own_process_is_undone(scripts, monkeypatch):
    monkeypatch.setenv("KR_FAKE_KEPT", "kept")
    (scripts / "kr_fake_backend.py").write_text(
        "import os\nos.environ['KR_FAKE_BACKEND'] = 'jax'\nos.environ['KR_FAKE_KEPT'] = 'x'\n"
        "SEEN = os.environ['KR_FAKE_BACKEND']\n")
    assert benchmark_scripts.load("kr_fake_backend").SEEN == "jax"
    assert "KR_FAKE_BACKEND" not in os.environ
    assert os.environ["KR_FAKE_KEPT"] == "kept"


def test_a_name_that_is_not_a_script_is_refused(scripts):
    with pytest.raises(FileNotFoundError, match=r"the name of a script in .*benchmarks "
                                                r"\(without \.py\), received 'kr_fake_gone'"):
        benchmark_scripts.load("kr_fake_gone")
    with pytest.raises(FileNotFoundError, match="received 'kr_fake_gone.py'"):
        benchmark_scripts.path("kr_fake_gone.py")


def test_another_module_of_the_name_is_refused(scripts, monkeypatch):
    (scripts / "kr_fake_taken.py").write_text("")
    monkeypatch.setitem(sys.modules, "kr_fake_taken", types.ModuleType("kr_fake_taken"))
    with pytest.raises(ImportError, match="another module of that name comes first"):
        benchmark_scripts.load("kr_fake_taken")


def test_the_real_scripts_load_under_their_run_names():
    assert benchmark_scripts.load("results_io").__name__ == "results_io"
    assert benchmark_scripts.path("fault_soak").endswith(os.path.join("benchmarks",
                                                                      "fault_soak.py"))

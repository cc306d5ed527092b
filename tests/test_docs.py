"""The docs' figures come from results files that exist and name the command that wrote them.

Convention (docs/contributing.md, "Docs and figures"): a benchmark or reproduction script writes
``benchmarks/results/<name>.md`` whose first line is ``Written by `<command>`.`` (or just the
command in backticks) and
``<name>.json`` with a ``"command"`` key (``benchmarks/results_io.py``). A page (README.md or
docs/**/*.md) cites a results file by its path; a path right after ``--output`` is a file a
command *would* write, not a citation. A page that cites a results file names its command, by
including the file (``--8<-- "benchmarks/results/..."``, which brings the first line along) or by
quoting the command.
"""

import importlib.util
import json
import os
import re
import sys
import types

import benchmark_scripts
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CITATION = re.compile(r"(--output[= ])?(benchmarks/results/[\w./-]*\w\.(?:md|json))")
_INCLUDE = re.compile(r'^--8<-- "(benchmarks/results/[^"]+)"\s*$', re.MULTILINE)
_FIRST_LINE = re.compile(r"^(?:Written by )?`([^`]+)`")
_SCRIPT = re.compile(r"\bpython (?:-m benchmarks\.(\w+)|benchmarks/(\w+)\.py)\b")


def pages(root):
    """README.md and every Markdown page under docs/, as (relative path, text)."""
    found = ["README.md"] if os.path.exists(os.path.join(root, "README.md")) else []
    for directory, _, files in os.walk(os.path.join(root, "docs")):
        found += [os.path.relpath(os.path.join(directory, f), root) for f in files
                  if f.endswith(".md")]
    for path in sorted(found):
        with open(os.path.join(root, path), encoding="utf-8") as f:
            yield path, f.read()


def cited_results(text):
    """The results files a page cites (paths after ``--output`` are outputs, not citations)."""
    return sorted({m.group(2) for m in _CITATION.finditer(text) if not m.group(1)})


def results_command(root, path):
    """The command a results file names as its writer, or None."""
    with open(os.path.join(root, path), encoding="utf-8") as f:
        if path.endswith(".json"):
            command = json.load(f).get("command")
            return command if isinstance(command, str) else None
        match = _FIRST_LINE.match(f.readline())
        return match.group(1) if match else None


def results_file_problems(root):
    """Every results file must name, as its writer, a command that runs an existing script."""
    problems = []
    results = os.path.join(root, "benchmarks", "results")
    for name in sorted(os.listdir(results)) if os.path.isdir(results) else ():
        if not name.endswith((".md", ".json")):
            continue
        path = f"benchmarks/results/{name}"
        command = results_command(root, path)
        if command is None:
            problems.append(f"{path}: does not name the command that wrote it")
            continue
        script = _SCRIPT.search(command)
        if script is None:
            problems.append(f"{path}: its command {command!r} runs no benchmarks/ script")
        elif not os.path.exists(os.path.join(root, "benchmarks",
                                             (script.group(1) or script.group(2)) + ".py")):
            problems.append(f"{path}: its command {command!r} runs a script that does not exist")
    return problems


def page_problems(root):
    """Every cited results file exists, and the citing page names the command that wrote it."""
    problems = []
    for page, text in pages(root):
        included = set(_INCLUDE.findall(text))
        for path in cited_results(text):
            if not os.path.exists(os.path.join(root, path)):
                problems.append(f"{page}: cites {path}, which does not exist")
                continue
            if path in included:
                continue
            command = results_command(root, path)
            sibling = os.path.splitext(path)[0] + ".md"
            if sibling != path and sibling in included:
                continue  # the JSON's Markdown twin, with the same command, is on the page
            if command is None or command not in text:
                problems.append(f"{page}: cites {path} without naming the command that wrote "
                                f"it ({command!r})")
    return problems


def test_every_results_file_names_an_existing_writer():
    assert results_file_problems(REPO) == []


def test_every_cited_results_file_exists_with_its_command_on_the_page():
    assert page_problems(REPO) == []


def test_the_docs_cite_results_files():
    cited = {path for _, text in pages(REPO) for path in cited_results(text)}
    assert "benchmarks/results/rl_learning.md" in cited
    assert len(cited) >= 5


def _write(root, path, text):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w", encoding="utf-8") as f:
        f.write(text)


@pytest.fixture
def fake_repo(tmp_path):
    root = str(tmp_path)
    _write(root, "benchmarks/speed.py", "")
    _write(root, "benchmarks/results/speed.md",
           "Written by `python benchmarks/speed.py --output benchmarks/results/speed.md`.\n\n"
           "| x | 1.0 |\n")
    _write(root, "benchmarks/results/speed.json",
           json.dumps({"command": "python benchmarks/speed.py", "x": 1.0}))
    return root


def test_the_checks_pass_on_a_consistent_tree(fake_repo):
    _write(fake_repo, "docs/a.md", 'Speed:\n\n--8<-- "benchmarks/results/speed.md"\n')
    _write(fake_repo, "docs/b.md", "`python benchmarks/speed.py` wrote "
                                   "`benchmarks/results/speed.json`.\n")
    _write(fake_repo, "README.md", "Re-measure with `python benchmarks/speed.py "
                                   "--output=benchmarks/results/new.md`.\n")
    assert results_file_problems(fake_repo) == []
    assert page_problems(fake_repo) == []


def test_a_missing_results_file_fails(fake_repo):
    _write(fake_repo, "README.md", "The demo solves what `benchmarks/results/demo.md` says.\n")
    assert page_problems(fake_repo) == [
        "README.md: cites benchmarks/results/demo.md, which does not exist"]


def test_a_missing_snippet_fails(fake_repo):
    _write(fake_repo, "docs/a.md", '--8<-- "benchmarks/results/gone.md"\n')
    assert page_problems(fake_repo) == [
        "docs/a.md: cites benchmarks/results/gone.md, which does not exist"]


def test_a_page_without_the_command_fails(fake_repo):
    _write(fake_repo, "docs/a.md", "See `benchmarks/results/speed.md`: 1.0.\n")
    assert page_problems(fake_repo) == [
        "docs/a.md: cites benchmarks/results/speed.md without naming the command that wrote it "
        "('python benchmarks/speed.py --output benchmarks/results/speed.md')"]


def test_a_results_file_without_its_command_fails(fake_repo):
    _write(fake_repo, "benchmarks/results/bare.md", "`python benchmarks/speed.py`\n\n| x |\n")
    _write(fake_repo, "benchmarks/results/old.md", "| x | 2.0 |\n")
    _write(fake_repo, "benchmarks/results/orphan.json",
           json.dumps({"command": "python benchmarks/gone.py"}))
    assert results_file_problems(fake_repo) == [
        "benchmarks/results/old.md: does not name the command that wrote it",
        "benchmarks/results/orphan.json: its command 'python benchmarks/gone.py' runs a script "
        "that does not exist"]


def test_results_io_writes_the_convention(tmp_path, monkeypatch):
    results_io = benchmark_scripts.load("results_io")
    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))  # a script
    monkeypatch.setattr(sys, "argv", [os.path.join(REPO, "benchmarks", "speed.py"), "--n", "2"])
    root = str(tmp_path)
    _write(root, "benchmarks/speed.py", "")
    results_io.write_markdown(os.path.join(root, "benchmarks/results/speed.md"), "| x | 1 |")
    results_io.write_json(os.path.join(root, "benchmarks/results/speed.json"), {"x": 1})
    assert results_command(root, "benchmarks/results/speed.md") == (
        "python benchmarks/speed.py --n 2")
    assert results_command(root, "benchmarks/results/speed.json") == (
        "python benchmarks/speed.py --n 2")
    assert results_file_problems(root) == []
    assert sorted(os.listdir(os.path.join(root, "benchmarks/results"))) == [
        "speed.json", "speed.md"]  # no temporary file left behind
    module_main = types.ModuleType("__main__")
    module_main.__spec__ = importlib.util.spec_from_loader("benchmarks.speed", loader=None)
    monkeypatch.setitem(sys.modules, "__main__", module_main)  # python -m benchmarks.speed
    assert results_io.command_line() == "python -m benchmarks.speed --n 2"

    captured = results_io.StdoutCapture()
    print("| y | 2 |")
    captured.write_markdown(os.path.join(root, "captured.md"), command="python benchmarks/s.py")
    assert sys.stdout is captured._stdout
    with open(os.path.join(root, "captured.md"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert lines[:4] == ["Written by `python benchmarks/s.py`.", "", "| y | 2 |", ""]
    assert lines[4].startswith("Load average at the end (1/5/15 min): ")


# --- The API reference renders the docstrings' reST as Markdown (docs/hooks/docstring_markup.py)
def _docstring_markup():
    path = os.path.join(REPO, "docs", "hooks", "docstring_markup.py")
    spec = importlib.util.spec_from_file_location("docstring_markup", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docstring_markup_converts_roles_literal_blocks_and_doctests():
    pytest.importorskip("griffe")
    text = ("Uses :class:`~keras_relational.RelationalBlock` and :func:`f`.\n\n"
            "Per step::\n\n    y = f(x)\n    z = g(y)\n\nThen:\n\n"
            "    >>> import numpy as np\n    >>> np.zeros(2)\n    array([0., 0.])\n")
    converted = _docstring_markup().to_markdown(text)
    assert converted == (
        "Uses `RelationalBlock` and `f`.\n\nPer step:\n\n```python\ny = f(x)\nz = g(y)\n```\n\n"
        "Then:\n\n    ```pycon\n    >>> import numpy as np\n    >>> np.zeros(2)\n"
        "    array([0., 0.])\n    ```\n")


_HIGHLIGHTED = re.compile(r'<div class="highlight">.*?</div>', re.DOTALL)
_CODE = re.compile(r"<pre\b.*?</pre>|<code\b.*?</code>", re.DOTALL)
_ROLE_TEXT = re.compile(r":(?:py:)?(?:class|func|meth|data|attr|mod|obj|exc|const):")
_API_PAGES = ("layers", "models", "analysis", "environments", "agents")


@pytest.mark.slow
@pytest.mark.subprocess
def test_api_reference_renders_examples_as_code_and_no_rest_markup(tmp_path):
    """The built API pages: every ``>>>`` inside a highlighted code block, no literal Sphinx role
    or ``::`` in the text (docs/hooks/docstring_markup.py)."""
    pytest.importorskip("mkdocstrings")
    import html
    import subprocess

    site = tmp_path / "site"
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(site)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert built.returncode == 0, built.stderr[-3000:]
    highlighted_examples = 0
    for name in _API_PAGES:
        with open(site / "api" / name / "index.html", encoding="utf-8") as f:
            page = f.read()
        blocks = _HIGHLIGHTED.findall(page)
        highlighted_examples += sum(block.count("&gt;&gt;&gt;") for block in blocks)
        outside = _HIGHLIGHTED.sub("", page)
        assert "&gt;&gt;&gt;" not in outside, f"api/{name}: a >>> example outside a code block"
        text = html.unescape(re.sub(r"<[^>]+>", "", _CODE.sub("", outside)))
        roles = sorted(set(_ROLE_TEXT.findall(text)))
        assert not roles, f"api/{name}: literal Sphinx roles {roles}"
        literal = [line.strip() for line in text.splitlines() if "::" in line]
        assert not literal, f"api/{name}: literal '::' in {literal[:5]}"
    assert highlighted_examples >= 18, highlighted_examples


# --- docs/tensorboard.md: its Python snippet on a compiled run's output ---------------------
def _python_block_after(text, heading):
    section = text[text.index(heading):]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


@pytest.mark.slow  # one tiny compiled run (its update compiles)
def test_tensorboard_page_snippet_reads_a_compiled_run(tmp_path, capsys):
    """The snippet of "Reading them in Python" prints the solve rates of a tiny compiled run,
    whose collect/ directory holds TF-Agents' tags (docs/tensorboard.md)."""
    pytest.importorskip("tensorboard")
    from keras_relational.agents.compiled import train_eval as compiled_train_eval

    root = str(tmp_path / "run")
    # Episodes of at most 3 steps finish inside every 4-step unroll.
    compiled_train_eval.train_eval(
        root, num_iterations=2, eval_episodes=0, num_envs=2, unroll_length=4, log_interval=1,
        env_kwargs=dict(goal_length=1, num_distractors=0, room_size=5, max_steps=3,
                        observation_type="one_hot"),
        model_kwargs=dict(key_dim=8, mlp_hidden_units=(8,), head_units=(8,),
                          conv_filters=(8, 8)), print_fn=lambda line: None)
    with open(os.path.join(REPO, "docs", "tensorboard.md"), encoding="utf-8") as f:
        snippet = _python_block_after(f.read(), "## Reading them in Python")
    assert '"/tmp/keras_relational_demo"' in snippet  # the demo's root_dir (Makefile DEMO_DIR)
    exec(snippet.replace('"/tmp/keras_relational_demo"', repr(root)), {})
    printed = capsys.readouterr().out.split("\n")
    steps = [int(line.split()[0]) for line in printed if line.strip()]
    assert steps == [1, 2], printed  # one solve rate per progress line
    from keras_relational.experiments.plots_lib import read_scalars

    collect = read_scalars(root)["collect"]
    assert {"Metrics/NumberOfEpisodes", "Metrics/EnvironmentSteps",
            "Metrics/EnvironmentStepsPerSecond", "Metrics/AverageReturn", "Metrics/SolveRate",
            "Metrics/SolveRate/EnvironmentSteps"} <= set(collect)
    assert list(collect["Metrics/SolveRate/EnvironmentSteps"][0]) == [8, 16]  # frames

"""benchmarks/xla_op_profile.py: its HLO parsing, and one tiny run of the script."""

import os
import re
import subprocess
import sys

import benchmark_scripts
import pytest

_SCRIPT = benchmark_scripts.path("xla_op_profile")

_BATCHED = "lhs_batch_dims={0,1}, lhs_contracting_dims={%d}, rhs_batch_dims={0,1}, "
_HLO = "\n".join([
    "HloModule learner_step",
    "",
    "%fused_computation (param_0: f32[4,3]) -> f32[4,3] {",
    "  %param_0 = f32[4,3]{1,0} parameter(0)",
    "  ROOT %negate.9 = f32[4,3]{1,0} negate(%param_0)",
    "}",
    "",
    "ENTRY %main.7 (arg0.1: f32[10,2,5,8], arg1.1: f32[10,2,5,8], arg2.1: f32[6,4]) -> f32[] {",
    "  %arg0.1 = f32[10,2,5,8]{3,2,1,0} parameter(0)",
    "  %arg1.1 = f32[10,2,5,8]{3,2,1,0} parameter(1)",
    "  %arg2.1 = f32[6,4]{1,0} parameter(2)",
    "  %logits.1 = f32[10,2,5,5]{3,2,1,0} dot(%arg0.1, %arg1.1), " + _BATCHED % 3
    + "rhs_contracting_dims={3}",
    "  %grad.2 = f32[10,2,8,8]{3,2,1,0} dot(%arg0.1, %arg1.1), " + _BATCHED % 2
    + "rhs_contracting_dims={2}",
    "  %plain.3 = f32[6,6]{1,0} dot(%arg2.1, %arg2.1), lhs_contracting_dims={1}, "
    "rhs_contracting_dims={1}",
    "  ROOT %tuple = (f32[]) tuple()",
    "}",
    "",
])


@pytest.fixture(scope="module")
def profile_module():
    return benchmark_scripts.load("xla_op_profile")


def test_entry_dots_are_parsed_with_shapes_and_forms(profile_module):
    instructions = profile_module.parse_entry(_HLO)
    assert "negate.9" not in instructions  # only the ENTRY computation
    assert instructions["arg2.1"][:2] == ("parameter", (6, 4))
    forms = {}
    for name in ("logits.1", "grad.2", "plain.3"):
        _, _, line = instructions[name]
        lhs, rhs, transpose_lhs, transpose_rhs = profile_module.parse_dot(line, instructions)
        forms[name] = (lhs, rhs, profile_module.form_name(transpose_lhs, transpose_rhs))
    assert forms == {
        "logits.1": ((10, 2, 5, 8), (10, 2, 5, 8), "NT"),  # q k^T
        "grad.2": ((10, 2, 5, 8), (10, 2, 5, 8), "TN"),  # contracts the rows of the left operand
        "plain.3": ((6, 4), (6, 4), "NT"),
    }


def test_a_dot_with_batch_dimensions_last_is_refused(profile_module):
    hlo = _HLO.replace(_BATCHED % 3, _BATCHED % 0)
    instructions = profile_module.parse_entry(hlo)
    with pytest.raises(ValueError, match="Unexpected dot layout"):
        profile_module.parse_dot(instructions["logits.1"][2], instructions)


@pytest.mark.subprocess
def test_the_script_times_every_dot_of_a_small_step():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, _SCRIPT, "--agent", "simplicial", "--batch", "4", "--repeats", "1",
         "--top", "0"], env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [line for line in result.stdout.splitlines()
            if re.match(r"\| \S+ \| \[[\d, ]+\] \| (NN|NT|TN) \|", line)]
    match = re.search(r"its (\d+) dots alone", result.stdout)
    assert match and len(rows) == int(match.group(1)) > 10, result.stdout
    assert {row.split("|")[3].strip() for row in rows} == {"NN", "NT", "TN"}
    assert re.search(r"Dots: [\d.]+ MFLOP per frame", result.stdout), result.stdout

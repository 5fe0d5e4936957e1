"""jaxpp_sim's counterparts of synthesize, export (hand-off and plans), graph, validate-model,
calibrate and the MoE / what-if arguments of simulate and explore, each compared with the
jaxpp-sim binary's --json output (same library, same numbers), and each error path once.

Run by ctest with the environment of test_jaxpp_sim.py.
"""

import json
import os
import pathlib
import shutil

import pytest

import jaxpp_sim as js
from cli_helpers import cli, cli_error, cli_json


def same_error(call, command, *args):
    with pytest.raises(js.InputError) as e:
        call()
    assert str(e.value) == cli_error(command, *args)


# A small plan, written once by the CLI (model mode, one stage per actor).
PLAN_ARGS = ["--model", "gpt3-13b", "--cluster", "h100-sxm", "--gpus", "32", "--pp", "4",
             "--tp", "8", "--global-batch", "16"]


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    d = tmp_path_factory.mktemp("plans")
    out = {}
    # torchtitan's tensor-parallel plan always shards the sequence: "-sp" plans for it.
    for schedule, extra in (("1f1b", []), ("zb-h1", []), ("zb-h1-sp", ["--sequence-parallel"])):
        path = str(d / f"{schedule}.json")
        code, _, err = cli("simulate", *PLAN_ARGS, "--schedule", schedule.replace("-sp", ""),
                           *extra, "--plan", path)
        assert code == 0, err
        out[schedule] = path
    return out


def without_seconds(report):
    """A synthesis report without the wall-clock seconds of its search."""
    report = json.loads(json.dumps(report))
    report["search"].pop("seconds")
    return report


# --- synthesize -----------------------------------------------------------------------------------

def test_synthesize_measured_equals_cli(tmp_path):
    r = js.synthesize(pp=4, microbatches=8, t_f=1, t_b=1, t_w=1, max_evaluations=300)
    out, csv = str(tmp_path / "s.json"), str(tmp_path / "s.csv")
    c = cli_json("synthesize", "--pp", "4", "--microbatches", "8", "--t-f", "1", "--t-b", "1",
                 "--t-w", "1", "--max-evaluations", "300", "--quiet", "--out", out, "--csv", csv)
    assert r.step_time_s == c["step_time_s"]
    assert r.bubble_rate == c["bubble_rate"]
    assert r.peak_stashed == c["peak_stashed"]
    assert without_seconds(r.report) == without_seconds(c)
    assert r.report["memory_limit_microbatches"] == [4, 4, 4, 4]  # the default budget K = pp
    assert max(r.peak_stashed) <= 4
    with open(out, encoding="utf-8") as f:
        assert r.schedule_json == f.read()
    with open(csv, encoding="utf-8") as f:
        assert r.csv_text == f.read()
    assert r.schedule == json.loads(r.schedule_json)
    assert r.plan is None


def test_synthesize_stage_times_dict_equals_file(tmp_path):
    times = {"stages": [{"t_f_ms": 1.0, "t_b_ms": 1.5, "t_w_ms": 0.5, "t_comm_ms": 0.1},
                        {"t_f_ms": 2.0, "t_b_ms": 2.5, "t_w_ms": 1.0, "t_comm_ms": 0.1}]}
    path = tmp_path / "times.json"
    path.write_text(json.dumps(times))
    a = js.synthesize(pp=2, microbatches=4, stage_times=times, memory_limit_microbatches=1,
                      max_evaluations=100)
    b = js.synthesize(pp=2, microbatches=4, stage_times=str(path), memory_limit_microbatches=1,
                      max_evaluations=100)
    c = cli_json("synthesize", "--pp", "2", "--microbatches", "4", "--stage-times", str(path),
                 "--memory-limit-microbatches", "1", "--max-evaluations", "100", "--quiet")
    assert without_seconds(a.report) == without_seconds(b.report) == without_seconds(c)
    assert max(a.peak_stashed) <= 1


def test_synthesize_plan_mode_equals_cli(plans, tmp_path):
    plan_out = str(tmp_path / "synth-plan.json")
    r = js.synthesize(plan=plans["1f1b"], max_evaluations=200)
    c = cli_json("synthesize", "--plan", plans["1f1b"], "--max-evaluations", "200", "--quiet",
                 "--plan-out", plan_out)
    assert without_seconds(r.report) == without_seconds(c)
    assert "peak_memory_bytes" in r.report
    with open(plan_out, encoding="utf-8") as f:
        assert r.plan == json.load(f)
    # A plan as a dict gives the same synthesis.
    with open(plans["1f1b"], encoding="utf-8") as f:
        d = js.synthesize(plan=json.load(f), max_evaluations=200)
    assert without_seconds(d.report) == without_seconds(r.report)


def test_synthesize_errors_are_the_clis():
    same_error(lambda: js.synthesize(pp=4, microbatches=8, t_f=1, t_b=1,
                                     memory_limit_microbatches=0),
               "synthesize", "--pp", "4", "--microbatches", "8", "--t-f", "1", "--t-b", "1",
               "--memory-limit-microbatches", "0")
    same_error(lambda: js.synthesize(pp=4, microbatches=8, t_f=1, stage_times="x.json"),
               "synthesize", "--pp", "4", "--microbatches", "8", "--t-f", "1",
               "--stage-times", "x.json")
    same_error(lambda: js.synthesize(pp=4, t_f=1, t_b=1), "synthesize", "--pp", "4",
               "--t-f", "1", "--t-b", "1")
    same_error(lambda: js.synthesize(pp=2, microbatches=2, t_f=1, t_b=1, time_budget_s=-1),
               "synthesize", "--pp", "2", "--microbatches", "2", "--t-f", "1", "--t-b", "1",
               "--time-budget-s", "-1")
    same_error(lambda: js.synthesize(pp=2, microbatches=2, t_f=1, t_b=1,
                                     memory_limit_bytes=10),
               "synthesize", "--pp", "2", "--microbatches", "2", "--t-f", "1", "--t-b", "1",
               "--memory-limit-bytes", "10")


def test_synthesize_plan_mode_refuses_measured_arguments(plans):
    same_error(lambda: js.synthesize(plan=plans["1f1b"], pp=4), "synthesize", "--plan",
               plans["1f1b"], "--pp", "4")


# --- export: hand-off and plans -------------------------------------------------------------------

@pytest.mark.parametrize("target", ["megatron", "jaxpp"])
def test_handoff_text_equals_cli_byte_for_byte(plans, tmp_path, target):
    out = str(tmp_path / f"{target}.txt")
    code, _, err = cli("export", "--plan", plans["1f1b"], "--format", target, "-o", out)
    assert code == 0, err
    with open(out, encoding="utf-8") as f:
        expected = f.read()
    assert js.export(plans["1f1b"], target) == expected
    with open(plans["1f1b"], encoding="utf-8") as f:
        assert js.export(json.load(f), target) == expected


def test_handoff_torchtitan_and_its_csv_equal_cli(plans, tmp_path):
    cli_csv, py_csv = str(tmp_path / "cli.csv"), str(tmp_path / "py.csv")
    out = str(tmp_path / "job.toml")
    code, _, err = cli("export", "--plan", plans["zb-h1-sp"], "--format", "torchtitan", "-o",
                       out, "--csv", py_csv)
    assert code == 0, err
    with open(out, encoding="utf-8") as f:
        toml = f.read()
    with open(py_csv, encoding="utf-8") as f:
        csv = f.read()
    os.replace(py_csv, cli_csv)
    assert js.export(plans["zb-h1-sp"], "torchtitan", csv_path=py_csv) == toml
    with open(py_csv, encoding="utf-8") as f:
        assert f.read() == csv
    # A model-mode SimResult carries its plan.
    r = js.simulate(model="gpt3-13b", cluster="h100-sxm", gpus=32, pp=4, tp=8, global_batch=16,
                    schedule="1f1b", trace=False)
    code, _, err = cli("export", "--plan", plans["1f1b"], "--format", "megatron", "-o", out)
    with open(out, encoding="utf-8") as f:
        assert js.export(r, "megatron") == f.read()


def test_handoff_errors_are_the_clis(plans):
    # Megatron-LM cannot run ZB-H1: the target's message.
    same_error(lambda: js.export(plans["zb-h1"], "megatron"), "export", "--plan",
               plans["zb-h1"], "--format", "megatron", "-o", "-")
    same_error(lambda: js.export(plans["1f1b"], "torchtitan"), "export", "--plan",
               plans["1f1b"], "--format", "torchtitan", "-o", "-")
    same_error(lambda: js.export(plans["1f1b"], "megatron", csv_path="s.csv"), "export",
               "--plan", plans["1f1b"], "--format", "megatron", "-o", "-", "--csv", "s.csv")


def test_handoff_csv_never_overwrites_the_plan_nor_writes_a_directory(plans, tmp_path):
    # The plan file given as csv_path was replaced by the schedule CSV; a directory raised a bare
    # IsADirectoryError.
    plan = str(tmp_path / "plan.json")
    shutil.copy(plans["zb-h1-sp"], plan)
    with open(plan, encoding="utf-8") as f:
        before = f.read()
    same_error(lambda: js.export(plan, "torchtitan", csv_path=plan), "export", "--plan", plan,
               "--format", "torchtitan", "-o", "-", "--csv", plan)
    with open(plan, encoding="utf-8") as f:
        assert f.read() == before
    same_error(lambda: js.export(plan, "torchtitan", csv_path=str(tmp_path)), "export", "--plan",
               plan, "--format", "torchtitan", "-o", "-", "--csv", str(tmp_path))
    # The CLI's own check (one implementation): a CSV in a missing directory is refused before
    # anything is computed, with its message (it was an OSError's "cannot write").
    missing = str(tmp_path / "no-such-dir" / "s.csv")
    same_error(lambda: js.export(pathlib.Path(plan), "torchtitan", csv_path=missing), "export",
               "--plan", plan, "--format", "torchtitan", "-o", "-", "--csv", missing)


def test_export_of_a_plan_equals_cli(plans):
    code, out, err = cli("export", "--plan", plans["1f1b"], "--format", "text", "-o", "-")
    assert code == 0, err
    assert js.export(plans["1f1b"], "text") == out
    svg = js.export(plans["1f1b"], "svg")
    assert svg.lstrip().startswith("<?xml") or "<svg" in svg


# --- graph ----------------------------------------------------------------------------------------

def test_graph_equals_cli(tmp_path):
    dot = str(tmp_path / "g.dot")
    g = js.graph(model="gpt3-13b", pp=4, virtual=2, microbatches=4, split_backward=True,
                 dot=True)
    c = cli_json("graph", "--model", "gpt3-13b", "--pp", "4", "--virtual", "2",
                 "--microbatches", "4", "--split-backward", "--dot", dot)
    text = g.pop("dot")
    assert g == c
    with open(dot, encoding="utf-8") as f:
        assert text == f.read()
    # A Model object and an uneven auto partition.
    g2 = js.graph(model=js.Model.load("gpt3-13b"), pp=4, first_stage_fewer=2)
    assert g2 == cli_json("graph", "--model", "gpt3-13b", "--pp", "4", "--first-stage-fewer", "2")


def test_graph_errors_are_the_clis():
    same_error(lambda: js.graph(model="gpt3-13b", pp=4, partition="0,10,20,30",
                                first_stage_fewer=1),
               "graph", "--model", "gpt3-13b", "--pp", "4", "--partition", "0,10,20,30",
               "--first-stage-fewer", "1")
    same_error(lambda: js.graph(model="gpt3-13b", pp=1000), "graph", "--model", "gpt3-13b",
               "--pp", "1000")


def test_graph_recompute_modules_and_offloading_equal_cli():
    # Megatron-Core's recompute modules: the stash and recompute columns as graph's.
    g = js.graph(model="qwen3-30b-a3b", pp=1, recompute="selective",
                 recompute_modules=["moe_act", "layernorm", "core_attn"])
    assert g == cli_json("graph", "--model", "qwen3-30b-a3b", "--pp", "1", "--recompute",
                         "selective", "--recompute-modules", "core_attn,layernorm,moe_act")
    assert g["recompute_modules"] == ["core_attn", "layernorm", "moe_act"]
    plain = js.graph(model="qwen3-30b-a3b", pp=1, recompute="selective")
    # 48 MoE layers x 4096 tokens x (2048 + 8 x 768) x 2 bytes: the pre-MLP norm's output and the
    # routed activation output.
    assert plain["stages"][0]["stash_bytes"] - g["stages"][0]["stash_bytes"] == 3221225472
    assert js.graph(model="qwen3-30b-a3b", pp=1, recompute="selective",
                    recompute_modules="core_attn") == plain
    # Activation offloading, and partial recompute.
    off = js.graph(model="gpt3-1.3b", pp=1, microbatch_size=8, offload_layers=10)
    assert off == cli_json("graph", "--model", "gpt3-1.3b", "--pp", "1", "--microbatch-size",
                           "8", "--offload-layers", "10")
    assert off["offload_layers"] == 10 and "offloaded_stash_bytes" in off["stages"][0]
    part = js.graph(model="gpt3-1.3b", pp=2, partition="even", recompute="full",
                    recompute_layers=4)
    assert part == cli_json("graph", "--model", "gpt3-1.3b", "--pp", "2", "--partition", "even",
                            "--recompute", "full", "--recompute-layers", "4")
    assert part["recompute_layers"] == 4


def test_graph_recompute_modules_and_offloading_errors_are_the_clis():
    base = ["graph", "--model", "gpt3-1.3b", "--pp", "1"]
    same_error(lambda: js.graph(model="gpt3-1.3b", pp=1, recompute="full",
                                recompute_modules="layernorm"),
               *base, "--recompute", "full", "--recompute-modules", "layernorm")
    same_error(lambda: js.graph(model="gpt3-1.3b", pp=1, recompute="selective",
                                recompute_modules=["moe_act"]),
               *base, "--recompute", "selective", "--recompute-modules", "moe_act")
    same_error(lambda: js.graph(model="gpt3-1.3b", pp=1, recompute="selective",
                                recompute_modules="core_attn,norm"),
               *base, "--recompute", "selective", "--recompute-modules", "core_attn,norm")
    same_error(lambda: js.graph(model="gpt3-1.3b", pp=2, partition="even", offload_layers=4),
               "graph", "--model", "gpt3-1.3b", "--pp", "2", "--partition", "even",
               "--offload-layers", "4")
    same_error(lambda: js.graph(model="gpt3-1.3b", pp=1, offload_layers=24),
               *base, "--offload-layers", "24")
    same_error(lambda: js.graph(model="gpt3-1.3b", pp=1, recompute="selective",
                                recompute_layers=2),
               *base, "--recompute", "selective", "--recompute-layers", "2")


def test_graph_balanced_time_equals_cli_and_simulate():
    args = ["--model", "llama3-8b", "--pp", "2", "--tp", "2", "--dp", "2", "--virtual", "2",
            "--microbatches", "8", "--schedule", "interleaved-1f1b", "--zero1",
            "--partition", "balanced-time"]
    g = js.graph(model="llama3-8b", pp=2, tp=2, dp=2, virtual=2, microbatches=8,
                 schedule="interleaved-1f1b", zero1=True, partition="balanced-time")
    assert g == cli_json("graph", *args)
    s = js.simulate(model="llama3-8b", gpus=8, pp=2, tp=2, dp=2, virtual=2, global_batch=16,
                    schedule="interleaved-1f1b", zero1=True, partition="balanced-time",
                    trace=False)
    assert g["partition"] == s.metrics["stage_begin"]
    assert g["placement"] == "loop"
    even = js.graph(model="llama3-8b", pp=4, partition="even")
    assert even == cli_json("graph", "--model", "llama3-8b", "--pp", "4", "--partition", "even")
    assert even["partition"] == [0, 9, 17, 25]


def test_graph_balanced_time_errors_are_the_clis():
    same_error(lambda: js.graph(model="llama3-8b", pp=4, partition="balanced-time"),
               "graph", "--model", "llama3-8b", "--pp", "4", "--partition", "balanced-time")
    same_error(lambda: js.graph(model="llama3-8b", pp=4, tp=2), "graph", "--model",
               "llama3-8b", "--pp", "4", "--tp", "2")
    same_error(lambda: js.graph(model="llama3-8b", pp=4, partition="balanced-time",
                                schedule="1f1b", max_memory_gib=2),
               "graph", "--model", "llama3-8b", "--pp", "4", "--partition", "balanced-time",
               "--schedule", "1f1b", "--max-memory-gib", "2")


# --- MoE and what-if arguments --------------------------------------------------------------------

MOE = dict(model="mixtral-8x7b", cluster="h100-sxm", gpus=32, pp=4, tp=2, dp=4,
           global_batch=32, schedule="1f1b", check_memory=False)
MOE_CLI = ["--model", "mixtral-8x7b", "--cluster", "h100-sxm", "--gpus", "32", "--pp", "4",
           "--tp", "2", "--dp", "4", "--global-batch", "32", "--schedule", "1f1b",
           "--no-memory-check"]


def test_moe_simulate_equals_cli():
    r = js.simulate(**MOE, ep=4, etp=1, moe_imbalance=1.3, moe_overlap="1f1b", trace=False)
    c = cli_json("simulate", *MOE_CLI, "--ep", "4", "--etp", "1", "--moe-imbalance", "1.3",
                 "--moe-overlap", "1f1b")
    assert r.metrics == c
    assert r.plan["config"]["ep"] == 4 and r.plan["config"]["moe_overlap"] == "1f1b"
    # The routing imbalance slows the step down.
    balanced = js.simulate(**MOE, ep=4, etp=1, moe_overlap="1f1b", trace=False)
    assert r.step_time_s > balanced.step_time_s


def test_moe_dispatcher_and_routing_equal_cli():
    r = js.simulate(**MOE, ep=4, etp=1, moe_dispatcher="deepep", moe_routing="contiguous",
                    trace=False)
    c = cli_json("simulate", *MOE_CLI, "--ep", "4", "--etp", "1", "--moe-dispatcher", "deepep",
                 "--moe-routing", "contiguous")
    assert r.metrics == c
    assert r.plan["config"]["moe_dispatcher"] == "deepep"
    assert r.plan["config"]["moe_routing"] == "contiguous"
    alltoall = js.simulate(**MOE, ep=4, etp=1, trace=False)
    assert r.metrics["alltoall_s"] < alltoall.metrics["alltoall_s"]
    same_error(lambda: js.simulate(**MOE, ep=4, moe_dispatcher="nccl"), "simulate", *MOE_CLI,
               "--ep", "4", "--moe-dispatcher", "nccl")


def test_moe_errors_are_the_clis():
    same_error(lambda: js.simulate(**MOE, ep=3), "simulate", *MOE_CLI, "--ep", "3")
    same_error(lambda: js.simulate(**MOE, moe_overlap="sometimes"), "simulate", *MOE_CLI,
               "--moe-overlap", "sometimes")
    same_error(lambda: js.simulate(schedule="1f1b", pp=2, microbatches=2, t_f=1, t_b=1, ep=2),
               "simulate", "--schedule", "1f1b", "--pp", "2", "--microbatches", "2", "--t-f",
               "1", "--t-b", "1", "--ep", "2")


def test_measured_moe_all_to_all_equals_cli():
    args = dict(schedule="dualpipev", pp=4, microbatches=16, t_f=1, t_b=1, t_w=1, t_a2a_f=0.8,
                t_a2a_b=0.4)
    cli_args = ["--schedule", "dualpipev", "--pp", "4", "--microbatches", "16", "--t-f", "1",
                "--t-b", "1", "--t-w", "1", "--t-a2a-f", "0.8", "--t-a2a-b", "0.4"]
    for overlap in ("auto", "none"):
        r = js.simulate(**args, moe_overlap=overlap, trace=False)
        assert r.metrics == cli_json("simulate", *cli_args, "--moe-overlap", overlap)
        assert r.metrics["alltoall_s"] == pytest.approx(8 * 16 * 1.2e-3)
    serial = js.simulate(**args, moe_overlap="none", trace=False)
    overlapped = js.simulate(**args, trace=False)
    assert overlapped.metrics["alltoall_exposed_s"] < serial.metrics["alltoall_exposed_s"]
    same_error(lambda: js.simulate(**args, moe_overlap="often"), "simulate", *cli_args,
               "--moe-overlap", "often")
    same_error(lambda: js.simulate(**dict(args, t_a2a_f=-1)), "simulate",
               *[a if a != "0.8" else "-1" for a in cli_args])


def test_perturbed_simulate_equals_cli():
    spec = "slow-actor=1:1.5,jitter=0.05,seed=7"
    r = js.simulate(schedule="zb-h1", pp=4, microbatches=8, t_f=1, t_b=1, t_w=1, perturb=spec)
    c = cli_json("simulate", "--schedule", "zb-h1", "--pp", "4", "--microbatches", "8",
                 "--t-f", "1", "--t-b", "1", "--t-w", "1", "--perturb", spec)
    assert r.metrics == c
    assert r.metrics["perturbation"]["slowdown"] > 1
    m = js.simulate(**MOE, perturb="slow-link=0-1:3", trace=False)
    assert m.metrics == cli_json("simulate", *MOE_CLI, "--perturb", "slow-link=0-1:3")
    assert m.plan is None  # a plan holds the unperturbed prediction


def test_seq_lens_simulate_equals_cli():
    # Model mode: each microbatch priced at its own length; measured mode: linear in the tokens.
    spec = "seq-lens=2048*7:8192"
    r = js.simulate(model="gpt3-1.3b", gpus=4, pp=4, global_batch=8, schedule="1f1b",
                    perturb=spec, trace=False)
    c = cli_json("simulate", "--model", "gpt3-1.3b", "--gpus", "4", "--pp", "4",
                 "--global-batch", "8", "--schedule", "1f1b", "--perturb", spec)
    assert r.metrics == c
    assert r.metrics["perturbation"]["slowdown"] > 1
    spec = "seq-lens=1000*7:2000,nominal-seq-len=1000"
    m = js.simulate(schedule="gpipe", pp=4, microbatches=8, t_f=1, t_b=1, t_w=1, perturb=spec)
    assert m.metrics == cli_json("simulate", "--schedule", "gpipe", "--pp", "4",
                                 "--microbatches", "8", "--t-f", "1", "--t-b", "1", "--t-w", "1",
                                 "--perturb", spec)
    assert abs(m.metrics["step_time_s"] - 45e-3) < 1e-12


def test_perturb_errors_are_the_clis():
    same_error(lambda: js.simulate(schedule="1f1b", pp=2, microbatches=2, t_f=1, t_b=1,
                                   perturb="slow-actor=5:2"),
               "simulate", "--schedule", "1f1b", "--pp", "2", "--microbatches", "2", "--t-f",
               "1", "--t-b", "1", "--perturb", "slow-actor=5:2")
    same_error(lambda: js.simulate(**MOE, perturb="jitter=0.1", breakdown=True), "simulate",
               *MOE_CLI, "--perturb", "jitter=0.1", "--breakdown")
    same_error(lambda: js.simulate(schedule="1f1b", pp=2, microbatches=2, t_f=1, t_b=1,
                                   perturb="seq-lens=1:2:3,nominal-seq-len=2"),
               "simulate", "--schedule", "1f1b", "--pp", "2", "--microbatches", "2", "--t-f",
               "1", "--t-b", "1", "--perturb", "seq-lens=1:2:3,nominal-seq-len=2")


EXPLORE = dict(model="gpt3-13b", cluster="h100-sxm", gpus=16, global_batch=32, pp=[2, 4],
               tp=[4, 8], schedules=["1f1b", "zb-h1"], microbatch_sizes=[1], zero1="off",
               recompute=["none"], threads=1)
EXPLORE_CLI = ["--model", "gpt3-13b", "--cluster", "h100-sxm", "--gpus", "16", "--global-batch",
               "32", "--pp", "2,4", "--tp", "4,8", "--schedules", "1f1b,zb-h1",
               "--microbatch-sizes", "1", "--zero1", "off", "--recompute", "none", "--threads",
               "1", "--quiet"]


def test_explore_robust_and_synthesize_equal_cli():
    r = js.explore(**EXPLORE, top=3, robust=4, robust_jitter=0.2, synthesize=True,
                   synthesize_top=2, synthesize_time_s=5)
    c = cli_json("explore", *EXPLORE_CLI, "--top", "3", "--robust", "4", "--robust-jitter", "0.2",
                 "--synthesize", "--synthesize-top", "2", "--synthesize-time-s", "5")
    assert r.robust == c["robust"]
    assert len(r.robust["ranking"]) == 3
    assert r.synthesis["considered"] == c["synthesis"]["considered"] == 2
    assert r.synthesis["improved"] == c["synthesis"]["improved"]
    assert [x["step_time_s"] for x in r.ranked] == [x["step_time_s"] for x in c["configs"]
                                                    if "rank" in x]
    assert r.warnings == c["warnings"]


def test_explore_moe_space_equals_cli():
    args = dict(model="mixtral-8x7b", cluster="h100-sxm", gpus=16, global_batch=16, pp=[4],
                tp=[2], ep=[1, 2], etp=[1], schedules=["1f1b"], microbatch_sizes=[1],
                zero1="off", recompute=["full"], max_memory_gib=200, threads=1)
    r = js.explore(**args)
    c = cli_json("explore", "--model", "mixtral-8x7b", "--cluster", "h100-sxm", "--gpus", "16",
                 "--global-batch", "16", "--pp", "4", "--tp", "2", "--ep", "1,2", "--etp", "1",
                 "--schedules", "1f1b", "--microbatch-sizes", "1", "--zero1", "off",
                 "--recompute", "full", "--max-memory-gib", "200", "--threads", "1", "--quiet")
    assert r.summary["configs"] == c["configs"]
    assert {x["config"].get("ep", 1) for x in r.configs} == {1, 2}
    assert r.best == c["best"]


def test_explore_partial_recompute_equals_cli():
    args = dict(EXPLORE, recompute=["none", "full:4", "full"])
    r = js.explore(**args)
    c = cli_json("explore", *[("none,full:4,full" if a == "none" else a) for a in EXPLORE_CLI])
    assert r.summary["configs"] == c["configs"]
    assert {x["config"].get("recompute_layers", -1) for x in r.configs} == {-1, 4}
    assert r.best == c["best"]
    same_error(lambda: js.explore(**dict(EXPLORE, recompute=["full:x"])), "explore",
               *[("full:x" if a == "none" else a) for a in EXPLORE_CLI])


def test_explore_recompute_modules_equal_cli():
    args = dict(model="qwen3-30b-a3b", cluster="h100-sxm", gpus=1, global_batch=1,
                microbatch_sizes=[1], tp=[1], schedules=["1f1b"], zero1="off",
                recompute=["selective", "selective:layernorm+moe_act"], max_memory_gib=1000,
                threads=1, csv=True)
    cli = ["--model", "qwen3-30b-a3b", "--cluster", "h100-sxm", "--gpus", "1",
           "--global-batch", "1", "--microbatch-sizes", "1", "--tp", "1", "--schedules", "1f1b",
           "--zero1", "off", "--max-memory-gib", "1000", "--threads", "1", "--quiet"]
    r = js.explore(**args)
    c = cli_json("explore", *cli, "--recompute", "selective,selective:layernorm+moe_act")
    assert r.summary["configs"] == c["configs"]
    assert r.best == c["best"]
    modules = [x["config"].get("recompute_modules") for x in r.summary["configs"]]
    assert sorted(modules, key=str) == [None, ["layernorm", "moe_act"]]
    assert "recompute_modules" in r.csv_text.splitlines()[0]
    same_error(lambda: js.explore(**dict(args, recompute=["selective:mla_up_proj"])), "explore",
               *cli, "--recompute", "selective:mla_up_proj")
    same_error(lambda: js.explore(**dict(args, recompute=["selective:norm"])), "explore",
               *cli, "--recompute", "selective:norm")


def test_explore_offloading_equals_cli():
    args = dict(model="gpt3-1.3b", cluster="a100-80g", gpus=1, global_batch=8,
                microbatch_sizes=[8], schedules=["1f1b"], zero1="off", recompute=["none"],
                max_memory_gib=40, threads=1, offload_layers=[0, 6, "auto"])
    cli = ["--model", "gpt3-1.3b", "--cluster", "a100-80g", "--gpus", "1", "--global-batch", "8",
           "--microbatch-sizes", "8", "--schedules", "1f1b", "--zero1", "off", "--recompute",
           "none", "--max-memory-gib", "40", "--threads", "1", "--quiet"]
    r = js.explore(**args)
    c = cli_json("explore", *cli, "--offload-layers", "0,6,auto")
    assert r.summary["configs"] == c["configs"]
    assert r.best == c["best"]
    assert any(x.get("offload_auto") for x in r.summary["configs"])
    same_error(lambda: js.explore(**dict(args, offload_layers=["x"])), "explore", *cli,
               "--offload-layers", "x")


def test_explore_what_if_errors_are_the_clis():
    same_error(lambda: js.explore(**EXPLORE, robust_jitter=0.2), "explore", *EXPLORE_CLI,
               "--robust-jitter", "0.2")
    same_error(lambda: js.explore(**EXPLORE, synthesize_top=2), "explore", *EXPLORE_CLI,
               "--synthesize-top", "2")
    same_error(lambda: js.explore(**EXPLORE, robust=0), "explore", *EXPLORE_CLI, "--robust", "0")


# --- validate-model, calibrate --------------------------------------------------------------------

def test_validate_model_equals_cli():
    r = js.validate_model(rows_on="h100-sxm", split="test", band=0.2)
    c = cli_json("validate-model", "--rows-on", "h100-sxm", "--split", "test", "--band", "0.2")
    assert r == c
    assert r["rows"] and all(row["cluster"] == "h100-sxm" for row in r["rows"])


def test_validate_model_errors_are_the_clis():
    same_error(lambda: js.validate_model(split="train"), "validate-model", "--split", "train")
    same_error(lambda: js.validate_model(band=0), "validate-model", "--band", "0")
    same_error(lambda: js.validate_model(rows_on="no-such-gpu"), "validate-model", "--rows-on",
               "no-such-gpu")


def test_validate_model_refuses_a_row_its_schedule_cannot_run(tmp_path):
    # Std1F1B with virtual_stages 3: the CLI's corpus error (field 'schedule'), not a report.
    small = os.path.join(os.path.dirname(__file__), "..", "data", "corpus", "small.json")
    with open(small) as f:
        doc = json.load(f)
    doc["rows"] = doc["rows"][:1]  # a-1.3b-pp2: pp 2, 8 microbatches, a preset model
    doc["rows"][0]["virtual_stages"] = 3
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc))
    same_error(lambda: js.validate_model(corpus=path), "validate-model", "--corpus", str(path))
    with pytest.raises(js.InputError, match="field 'schedule': Std1F1B places stage r on actor r"):
        js.validate_model(corpus=path)


FAST_CALIBRATION = ["--quick", "--repeats", "1", "--warmup", "0", "--rounds", "1",
                    "--repetition-ms", "0", "--hot"]


# A fit of microbenchmarks can refuse noisy points on a loaded host ("times do not grow with
# ...", as the CLI does); such a calibration is tried again, up to three times.
NOISY_FIT = "do not grow"


def calibrated(call):
    for attempt in range(3):
        try:
            return call()
        except js.InputError as e:
            if NOISY_FIT not in str(e) or attempt == 2:
                raise


def cli_calibrated(*args):
    for attempt in range(3):
        code, out, err = cli("calibrate", *args, "--json")
        if code == 0 or NOISY_FIT not in err or attempt == 2:
            assert code == 0, err
            return json.loads(out)


def test_calibrate_threads_reports_as_cli(tmp_path):
    r = calibrated(lambda: js.calibrate(quick=True, repeats=1, warmup=0, rounds=1,
                                        repetition_ms=0, hot=True, name="host"))
    c = cli_calibrated(*FAST_CALIBRATION, "--name", "host")
    # Timings differ from run to run; the report has the CLI's fields and the fitted cluster
    # is a valid cluster that simulate accepts.
    assert set(r.report) == set(c)
    assert r.report["backend"] == c["backend"] == "threads"
    assert r.cluster.name == "host"
    path = tmp_path / "host.json"
    path.write_text(json.dumps(r.cluster.to_dict()))
    assert js.Cluster.load(str(path)).to_dict() == r.cluster.to_dict()


def test_calibrate_errors_are_the_clis():
    same_error(lambda: js.calibrate(rounds=0), "calibrate", "--rounds", "0")
    same_error(lambda: js.calibrate(warmup=-1), "calibrate", "--warmup", "-1")
    with pytest.raises(js.InputError, match="--backend"):
        js.calibrate(backend="mpi")


def test_explore_csv_and_plans_equal_cli(tmp_path):
    csv, plan = str(tmp_path / "space.csv"), str(tmp_path / "best.json")
    r = js.explore(**EXPLORE, csv=True)
    code, _, err = cli("explore", *EXPLORE_CLI, "--csv", csv, "--plan", plan)
    assert code == 0, err
    with open(csv, encoding="utf-8") as f:
        assert r.csv_text == f.read()
    with open(plan, encoding="utf-8") as f:
        expected = json.load(f)
    assert r.best_plan() == expected
    assert r.plan(r.best) == expected
    second = r.plan(r.ranked[1])
    assert second["predicted"]["step_time_s"] == r.ranked[1]["step_time_s"]
    assert js.explore(**EXPLORE).csv_text is None


@pytest.fixture(scope="module")
def run_trace(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("trace") / "run.json")
    code, _, err = cli("run", "--schedule", "1f1b", "--pp", "2", "--microbatches", "4",
                       "--steps", "3", "--hidden", "16", "--trace", path)
    assert code == 0, err
    return path


def test_calibrate_from_trace_equals_cli(run_trace):
    r = js.calibrate(from_trace=run_trace, hidden=16, name="fitted")
    c = cli_json("calibrate", "--from-trace", run_trace, "--hidden", "16", "--name", "fitted")
    assert r.report == c
    assert r.cluster.name == "fitted"


def test_calibrate_from_trace_takes_the_runs_flags_from_the_trace(run_trace):
    r = js.calibrate(from_trace=run_trace, name="fitted")
    assert r.report == cli_json("calibrate", "--from-trace", run_trace, "--name", "fitted")


def test_calibrate_from_trace_errors_are_the_clis(run_trace):
    # The trace records the run's --hidden 16, not 32.
    same_error(lambda: js.calibrate(from_trace=run_trace, hidden=32), "calibrate",
               "--from-trace", run_trace, "--hidden", "32")
    same_error(lambda: js.calibrate(from_trace=run_trace, hidden=16, quick=True), "calibrate",
               "--from-trace", run_trace, "--hidden", "16", "--quick")
    same_error(lambda: js.calibrate(hidden=16), "calibrate", "--hidden", "16")


def test_export_of_a_plan_task_graph_equals_cli(plans, tmp_path):
    dot = str(tmp_path / "g.dot")
    code, _, err = cli("export", "--plan", plans["zb-h1"], "--view", "taskgraph", "--format", "dot",
                       "-o", dot)
    assert code == 0, err
    with open(dot, encoding="utf-8") as f:
        assert js.export(plans["zb-h1"], "dot", view="taskgraph") == f.read()
    same_error(lambda: js.export(plans["zb-h1"], "text", view="taskgraph"), "export", "--plan",
               plans["zb-h1"], "--view", "taskgraph", "--format", "text", "-o", "-")


# --- partition modes and the memory limit (simulate --max-memory-gib, explore --partition) ---------

# gpt3-1.3b (24 transformer layers) on 8 A100s: unconstrained, the balanced-time search gives the
# first actor 6 layers and peaks at 8.7 GiB; under 8.5 GiB it takes a partition that fits (1F1B
# stashes the most microbatches on the first actor, so it gets fewer layers).
PARTITION_SIM = dict(model="gpt3-1.3b", cluster="a100-80g", gpus=8, pp=4, dp=2, global_batch=32,
                     schedule="1f1b", trace=False)
PARTITION_SIM_CLI = ["--model", "gpt3-1.3b", "--cluster", "a100-80g", "--gpus", "8", "--pp", "4",
                     "--dp", "2", "--global-batch", "32", "--schedule", "1f1b"]
GIB = 2**30


def test_simulate_balanced_time_under_a_memory_limit_equals_cli(tmp_path):
    plan_path = str(tmp_path / "plan.json")
    limited = js.simulate(**PARTITION_SIM, partition="balanced-time", max_memory_gib=8.5)
    c = cli_json("simulate", *PARTITION_SIM_CLI, "--partition", "balanced-time",
                 "--max-memory-gib", "8.5", "--plan", plan_path)
    assert limited.metrics == c
    with open(plan_path, encoding="utf-8") as f:
        assert limited.plan == json.load(f)
    assert limited.plan["partition"]["stage_begin"] == limited.metrics["stage_begin"]
    free = js.simulate(**PARTITION_SIM, partition="balanced-time")
    assert free.metrics == cli_json("simulate", *PARTITION_SIM_CLI, "--partition",
                                    "balanced-time")
    # The limit reaches the search: another partition, within 8.5 GiB where the free one is not.
    assert limited.metrics["stage_begin"] != free.metrics["stage_begin"]
    assert max(limited.metrics["peak_memory_bytes"]) <= 8.5 * GIB
    assert max(free.metrics["peak_memory_bytes"]) > 8.5 * GIB
    assert free.step_time_s < limited.step_time_s
    # Other partitions report no stage starts, as the CLI.
    auto = js.simulate(**PARTITION_SIM, max_memory_gib=10)
    assert auto.metrics == cli_json("simulate", *PARTITION_SIM_CLI, "--max-memory-gib", "10")
    assert "stage_begin" not in auto.metrics


def test_simulate_memory_limit_is_the_fit_check():
    # The auto partition peaks at 8.7 GiB: refused under 8 GiB, reported with check_memory=False.
    same_error(lambda: js.simulate(**PARTITION_SIM, max_memory_gib=8), "simulate",
               *PARTITION_SIM_CLI, "--max-memory-gib", "8")
    r = js.simulate(**PARTITION_SIM, max_memory_gib=8, check_memory=False)
    assert r.metrics == cli_json("simulate", *PARTITION_SIM_CLI, "--max-memory-gib", "8",
                                 "--no-memory-check")
    assert js.simulate(**PARTITION_SIM, max_memory_gib=9).step_time_s == r.step_time_s


def test_simulate_memory_limit_errors_are_the_clis():
    # No partition fits in 2 GiB: the search's one line, with the least peak it found.
    same_error(lambda: js.simulate(**PARTITION_SIM, partition="balanced-time", max_memory_gib=2),
               "simulate", *PARTITION_SIM_CLI, "--partition", "balanced-time",
               "--max-memory-gib", "2")
    for bad in (0, -1, 1e-9, 1e300):
        same_error(lambda: js.simulate(**PARTITION_SIM, max_memory_gib=bad), "simulate",
                   *PARTITION_SIM_CLI, "--max-memory-gib", repr(bad))
    # A model-mode argument in measured mode.
    same_error(lambda: js.simulate(schedule="1f1b", pp=2, microbatches=2, t_f=1, t_b=1,
                                   max_memory_gib=10),
               "simulate", "--schedule", "1f1b", "--pp", "2", "--microbatches", "2", "--t-f",
               "1", "--t-b", "1", "--max-memory-gib", "10")


PARTITION_EXPLORE = dict(model="gpt3-1.3b", cluster="a100-80g", gpus=8, global_batch=32,
                         pp=[2, 4], schedules=["1f1b", "zb-h1"], microbatch_sizes=[1],
                         zero1="off", recompute=["none"], threads=1)
PARTITION_EXPLORE_CLI = ["--model", "gpt3-1.3b", "--cluster", "a100-80g", "--gpus", "8",
                         "--global-batch", "32", "--pp", "2,4", "--schedules", "1f1b,zb-h1",
                         "--microbatch-sizes", "1", "--zero1", "off", "--recompute", "none",
                         "--threads", "1", "--quiet"]


def stage_begins(result):
    """{configuration id: stage starts of its rebuilt plan} of every ranked configuration."""
    return {e["id"]: result.plan(e)["partition"]["stage_begin"] for e in result.ranked}


@pytest.mark.parametrize("limit", [None, 10])
def test_explore_balanced_time_equals_cli_and_plans_keep_the_partition(tmp_path, limit):
    kw = {} if limit is None else {"max_memory_gib": limit}
    flags = [] if limit is None else ["--max-memory-gib", str(limit)]
    plan_path = str(tmp_path / "best.json")
    r = js.explore(**PARTITION_EXPLORE, partition="balanced-time", **kw)
    code, out, err = cli("explore", *PARTITION_EXPLORE_CLI, "--partition", "balanced-time",
                         *flags, "--json", "--plan", plan_path)
    assert code == 0, err
    assert r.summary == json.loads(out)
    assert r.summary["options"]["partition"] == "balanced-time"
    with open(plan_path, encoding="utf-8") as f:
        assert r.best_plan() == json.load(f)
    # Every ranked configuration's plan is rebuilt with the searched partition: its predicted
    # step time is the ranked one.
    assert len(r.ranked) >= 6
    for e in r.ranked:
        assert r.plan(e)["predicted"]["step_time_s"] == e["step_time_s"], e["id"]
    # ... which is not the automatic partition's for some of them (the test would pass with the
    # auto partition otherwise), and never slower.
    auto = js.explore(**PARTITION_EXPLORE, **kw)
    auto_steps = {e["id"]: e["step_time_s"] for e in auto.ranked}
    assert any(e["step_time_s"] < auto_steps[e["id"]] for e in r.ranked if e["id"] in auto_steps)
    assert all(e["step_time_s"] <= auto_steps[e["id"]] for e in r.ranked if e["id"] in auto_steps)
    assert stage_begins(r) != stage_begins(auto)


def test_explore_plans_keep_the_memory_limit_of_the_search():
    # The pp 4, dp 2 configurations take another partition under 8.5 GiB than without a limit;
    # plan(entry) rebuilds the limited one (and so predicts the entry's step time).
    limited = js.explore(**PARTITION_EXPLORE, partition="balanced-time", max_memory_gib=8.5)
    free = js.explore(**PARTITION_EXPLORE, partition="balanced-time")
    free_begins = stage_begins(free)
    changed = [e for e in limited.ranked
               if limited.plan(e)["partition"]["stage_begin"] != free_begins.get(e["id"])
               and e["id"] in free_begins]
    assert changed
    for e in changed:
        plan = limited.plan(e)
        assert plan["predicted"]["step_time_s"] == e["step_time_s"]
        assert max(plan["predicted"]["peak_memory_bytes"]) <= 8.5 * GIB


def test_explore_even_partition_equals_cli():
    r = js.explore(**PARTITION_EXPLORE, partition="even")
    c = cli_json("explore", *PARTITION_EXPLORE_CLI, "--partition", "even")
    assert r.summary == c
    for e in r.ranked[:3]:
        assert r.plan(e)["predicted"]["step_time_s"] == e["step_time_s"]


def test_explore_bound_prune_keeps_the_clis_top():
    # --bound-prune keeps the first --top entries exact: fewer are simulated with a smaller top,
    # and Python passes its top to the bound as the CLI does.
    args = dict(model="gpt3-1.3b", cluster="a100-80g", gpus=8, global_batch=32, threads=1)
    evaluated = {}
    for top in (1, 10):
        r = js.explore(**args, bound_prune=True, top=top)
        c = cli_json("explore", "--model", "gpt3-1.3b", "--cluster", "a100-80g", "--gpus", "8",
                     "--global-batch", "32", "--threads", "1", "--quiet", "--bound-prune",
                     "--top", str(top))
        assert r.summary == c
        evaluated[top] = r.summary["evaluated"]
    assert evaluated[1] < evaluated[10]


def test_explore_partition_errors_are_the_clis():
    for partition in ("balanced-time", "even"):
        same_error(lambda: js.explore(**PARTITION_EXPLORE, partition=partition, bound_prune=True),
                   "explore", *PARTITION_EXPLORE_CLI, "--partition", partition, "--bound-prune")
    same_error(lambda: js.explore(**PARTITION_EXPLORE, partition="0,13"), "explore",
               *PARTITION_EXPLORE_CLI, "--partition", "0,13")
    same_error(lambda: js.explore(**PARTITION_EXPLORE, partition="balanced"), "explore",
               *PARTITION_EXPLORE_CLI, "--partition", "balanced")
    same_error(lambda: js.explore(**PARTITION_EXPLORE, max_memory_gib=0), "explore",
               *PARTITION_EXPLORE_CLI, "--max-memory-gib", "0")
    # Nothing fits in 2 GiB, whatever the partition.
    same_error(lambda: js.explore(**PARTITION_EXPLORE, partition="balanced-time",
                                  max_memory_gib=2),
               "explore", *PARTITION_EXPLORE_CLI, "--partition", "balanced-time",
               "--max-memory-gib", "2")


# --- name-to-actor assignments (--assign) ---------------------------------------------------------

ASSIGNMENT = {"embedding": 0, "layer{i}": "i mod 4", "logits": 3}
ASSIGN_SIM = dict(model="gpt3-1.3b", gpus=4, pp=4, global_batch=8, schedule="Interleaved1F1B")
ASSIGN_SIM_CLI = ["--model", "gpt3-1.3b", "--gpus", "4", "--pp", "4", "--global-batch", "8",
                  "--schedule", "Interleaved1F1B"]


def write_assignment(tmp_path):
    path = tmp_path / "assign.json"
    path.write_text(json.dumps({"assignment": ASSIGNMENT}), encoding="utf-8")
    return str(path)


def test_simulate_with_an_assignment_equals_cli(tmp_path):
    path = write_assignment(tmp_path)
    c = cli_json("simulate", *ASSIGN_SIM_CLI, "--assign", path)
    by_dict = js.simulate(**ASSIGN_SIM, assign=ASSIGNMENT)
    by_path = js.simulate(**ASSIGN_SIM, assign=path)
    assert by_path.metrics == c
    # The dict form is the same assignment: everything but the source it names.
    assert {k: v for k, v in by_dict.metrics.items() if k != "assignment"} == \
        {k: v for k, v in c.items() if k != "assignment"}
    assert c["assignment"]["num_stages"] == 24
    # The assignment places the stages: not what the same schedule gives without one.
    assert js.simulate(**ASSIGN_SIM).step_time_s != by_dict.step_time_s


def test_explore_with_an_assignment_equals_cli_and_plans_keep_it(tmp_path):
    path = write_assignment(tmp_path)
    args = dict(model="gpt3-1.3b", gpus=4, global_batch=8, threads=1)
    r = js.explore(**args, pp=[4], assign=path)
    c = cli_json("explore", "--model", "gpt3-1.3b", "--gpus", "4", "--global-batch", "8",
                 "--threads", "1", "--quiet", "--pp", "4", "--assign", path)
    assert r.summary == c
    for e in r.ranked[:3]:
        assert r.plan(e)["predicted"]["step_time_s"] == e["step_time_s"]
        assert r.plan(e)["assignment"] == ASSIGNMENT


def test_assignment_errors_are_the_clis(tmp_path):
    path = write_assignment(tmp_path)
    args = dict(model="gpt3-1.3b", gpus=4, global_batch=8)
    for kwargs, flags in (
            (dict(pp=[2, 4]), ["--pp", "2,4"]),
            (dict(pp=[4], virtual=[2]), ["--pp", "4", "--virtual", "2"]),
            (dict(pp=[4], synthesize=True), ["--pp", "4", "--synthesize"])):
        expected = cli_error("explore", "--model", "gpt3-1.3b", "--gpus", "4", "--global-batch",
                             "8", "--assign", path, *flags)
        with pytest.raises(js.InputError) as e:
            js.explore(**args, assign=path, **kwargs)
        assert str(e.value) == expected
    # A layer the model lacks: the file, the key and the reason.
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"assignment": {"embedding-layer23": 0, "layer24": 1,
                                              "logits": 1}}), encoding="utf-8")
    expected = cli_error("simulate", "--model", "gpt3-1.3b", "--gpus", "2", "--pp", "2",
                         "--global-batch", "4", "--schedule", "1f1b", "--assign", str(bad))
    with pytest.raises(js.InputError) as e:
        js.simulate(model="gpt3-1.3b", gpus=2, pp=2, global_batch=4, schedule="1f1b",
                    assign=str(bad))
    assert str(e.value) == expected
    # Measured mode refuses it, as the CLI.
    with pytest.raises(js.InputError, match="--assign: a model-mode flag"):
        js.simulate(schedule="1f1b", pp=2, microbatches=4, t_f=1, t_b=1, assign=ASSIGNMENT)


# --- gradient and all-to-all dtypes (--grad-dtype, --a2a-dtype) ------------------------------------

def test_grad_dtype_equals_cli_and_halves_the_reduction(tmp_path):
    args = dict(model="gpt3-1.3b", cluster="a100-80g", gpus=8, pp=2, dp=4, global_batch=32,
                schedule="1f1b", trace=False)
    cli_args = ["--model", "gpt3-1.3b", "--cluster", "a100-80g", "--gpus", "8", "--pp", "2",
                "--dp", "4", "--global-batch", "32", "--schedule", "1f1b"]
    bf16 = js.simulate(**args, grad_dtype="bf16")
    assert bf16.metrics == cli_json("simulate", *cli_args, "--grad-dtype", "bf16")
    fp32 = js.simulate(**args)
    assert bf16.metrics["collective_bytes"] * 2 == fp32.metrics["collective_bytes"]
    assert bf16.plan["config"]["grad_dtype"] == "bf16"
    r = js.explore(model="gpt3-1.3b", cluster="a100-80g", gpus=8, global_batch=32, pp=[2],
                   tp=[1], schedules=["1f1b"], grad_dtype="bf16", threads=1)
    assert r.summary == cli_json("explore", "--model", "gpt3-1.3b", "--cluster", "a100-80g",
                                 "--gpus", "8", "--global-batch", "32", "--pp", "2", "--tp", "1",
                                 "--schedules", "1f1b", "--grad-dtype", "bf16", "--threads", "1")
    assert r.best_plan()["config"]["grad_dtype"] == "bf16"
    same_error(lambda: js.simulate(**args, grad_dtype="int8"), "simulate", *cli_args,
               "--grad-dtype", "int8")
    with pytest.raises(js.InputError, match="--grad-dtype"):
        js.simulate(schedule="1f1b", pp=2, microbatches=4, t_f=1, t_b=1, grad_dtype="bf16")


def test_optimizer_state_equals_cli_and_shrinks_the_state():
    args = dict(model="gpt3-1.3b", cluster="a100-80g", gpus=8, pp=2, dp=4, global_batch=32,
                schedule="1f1b", trace=False)
    cli_args = ["--model", "gpt3-1.3b", "--cluster", "a100-80g", "--gpus", "8", "--pp", "2",
                "--dp", "4", "--global-batch", "32", "--schedule", "1f1b"]
    bf16 = js.simulate(**args, optimizer_state="bf16")
    assert bf16.metrics == cli_json("simulate", *cli_args, "--optimizer-state", "bf16")
    fp32 = js.simulate(**args)
    # 4 bytes of state per parameter instead of 12: every actor's static memory falls.
    for a, b in zip(bf16.metrics["actors"], fp32.metrics["actors"]):
        assert a["static_bytes"] < b["static_bytes"]
    assert bf16.plan["config"]["optimizer_state"] == "bf16"
    r = js.explore(model="gpt3-1.3b", cluster="a100-80g", gpus=8, global_batch=32, pp=[2],
                   tp=[1], schedules=["1f1b"], optimizer_state="remainders", threads=1)
    assert r.summary == cli_json("explore", "--model", "gpt3-1.3b", "--cluster", "a100-80g",
                                 "--gpus", "8", "--global-batch", "32", "--pp", "2", "--tp", "1",
                                 "--schedules", "1f1b", "--optimizer-state", "remainders",
                                 "--threads", "1")
    same_error(lambda: js.simulate(**args, optimizer_state="int8"), "simulate", *cli_args,
               "--optimizer-state", "int8")
    with pytest.raises(js.InputError, match="--optimizer-state"):
        js.simulate(schedule="1f1b", pp=2, microbatches=4, t_f=1, t_b=1, optimizer_state="bf16")


def test_shard_grads_equals_cli_and_needs_zero1():
    args = dict(model="gpt3-1.3b", cluster="a100-80g", gpus=16, pp=2, dp=8, global_batch=64,
                schedule="1f1b", zero1=True, trace=False)
    cli_args = ["--model", "gpt3-1.3b", "--cluster", "a100-80g", "--gpus", "16", "--pp", "2",
                "--dp", "8", "--global-batch", "64", "--schedule", "1f1b", "--zero1"]
    sharded = js.simulate(**args, shard_grads=True)
    assert sharded.metrics == cli_json("simulate", *cli_args, "--shard-grads")
    assert sharded.plan["config"]["shard_gradients"] is True
    # m = 8 reduce-scatters per stage instead of one reduction.
    assert sharded.metrics["collective_bytes"] == 8 * js.simulate(**args).metrics["collective_bytes"]
    r = js.explore(model="gpt3-1.3b", cluster="a100-80g", gpus=16, global_batch=64, pp=[2],
                   tp=[1], schedules=["1f1b"], zero1="on", shard_grads="on", threads=1)
    assert r.summary == cli_json("explore", "--model", "gpt3-1.3b", "--cluster", "a100-80g",
                                 "--gpus", "16", "--global-batch", "64", "--pp", "2", "--tp", "1",
                                 "--schedules", "1f1b", "--zero1", "on", "--shard-grads", "on",
                                 "--threads", "1")
    assert r.best_plan()["config"]["shard_gradients"] is True
    no_zero1 = dict(args, zero1=False)
    same_error(lambda: js.simulate(**no_zero1, shard_grads=True), "simulate", *cli_args[:-1],
               "--shard-grads")
    g = js.graph(model="gpt3-1.3b", pp=2, partition="balanced-time", schedule="1f1b", dp=8,
                 zero1=True, shard_grads=True)
    assert g == cli_json("graph", "--model", "gpt3-1.3b", "--pp", "2", "--partition",
                         "balanced-time", "--schedule", "1f1b", "--dp", "8", "--zero1",
                         "--shard-grads")


def test_recompute_layers_equals_cli_and_needs_full():
    args = dict(model="gpt3-1.3b", cluster="a100-80g", gpus=4, pp=2, dp=2, global_batch=16,
                schedule="1f1b", partition="even", trace=False)
    cli_args = ["--model", "gpt3-1.3b", "--cluster", "a100-80g", "--gpus", "4", "--pp", "2",
                "--dp", "2", "--global-batch", "16", "--schedule", "1f1b", "--partition", "even"]
    some = js.simulate(**args, recompute="full", recompute_layers=4)
    assert some.metrics == cli_json("simulate", *cli_args, "--recompute", "full",
                                    "--recompute-layers", "4")
    assert some.plan["config"]["recompute_layers"] == 4
    same_error(lambda: js.simulate(**args, recompute="selective", recompute_layers=4), "simulate",
               *cli_args, "--recompute", "selective", "--recompute-layers", "4")
    with pytest.raises(js.InputError, match="--recompute-layers"):
        js.simulate(schedule="1f1b", pp=2, microbatches=4, t_f=1, t_b=1, recompute_layers=2)


def test_recompute_modules_equals_cli_and_needs_selective():
    args = dict(model="qwen3-30b-a3b", cluster="h100-sxm", gpus=8, pp=2, dp=4, ep=4,
                global_batch=16, schedule="1f1b", partition="even", trace=False,
                check_memory=False)
    cli_args = ["--model", "qwen3-30b-a3b", "--cluster", "h100-sxm", "--gpus", "8", "--pp", "2",
                "--dp", "4", "--ep", "4", "--global-batch", "16", "--schedule", "1f1b",
                "--partition", "even", "--no-memory-check"]
    act = js.simulate(**args, recompute="selective", recompute_modules=["moe_act", "layernorm"])
    assert act.metrics == cli_json("simulate", *cli_args, "--recompute", "selective",
                                   "--recompute-modules", "layernorm,moe_act")
    assert act.plan["config"]["recompute_modules"] == ["layernorm", "moe_act"]
    plain = js.simulate(**args, recompute="selective")
    assert act.metrics["peak_memory_bytes"][0] < plain.metrics["peak_memory_bytes"][0]
    same_error(lambda: js.simulate(**args, recompute="full", recompute_modules="moe_act"),
               "simulate", *cli_args, "--recompute", "full", "--recompute-modules", "moe_act")
    same_error(lambda: js.simulate(**args, recompute="selective", recompute_modules="mla_up_proj"),
               "simulate", *cli_args, "--recompute", "selective", "--recompute-modules",
               "mla_up_proj")


def test_offload_layers_equals_cli_and_follows_megatrons_rules():
    args = dict(model="gpt3-1.3b", cluster="h100-sxm", gpus=8, pp=1, dp=8, global_batch=32,
                microbatch_size=4, schedule="1f1b", trace=False)
    cli_args = ["--model", "gpt3-1.3b", "--cluster", "h100-sxm", "--gpus", "8", "--pp", "1",
                "--dp", "8", "--global-batch", "32", "--microbatch-size", "4", "--schedule",
                "1f1b"]
    off = js.simulate(**args, offload_layers=10)
    assert off.metrics == cli_json("simulate", *cli_args, "--offload-layers", "10")
    assert off.plan["config"]["offload_layers"] == 10
    assert off.metrics["peak_memory_bytes"][0] < js.simulate(**args).metrics["peak_memory_bytes"][0]
    same_error(lambda: js.simulate(**args, recompute="full", offload_layers=4), "simulate",
               *cli_args, "--recompute", "full", "--offload-layers", "4")
    with pytest.raises(js.InputError, match="--offload-layers"):
        js.simulate(schedule="1f1b", pp=2, microbatches=4, t_f=1, t_b=1, offload_layers=2)


def test_shard_params_equals_cli_and_needs_zero1():
    args = dict(model="gpt3-1.3b", cluster="a100-80g", gpus=16, pp=2, dp=8, global_batch=64,
                schedule="1f1b", zero1=True, trace=False)
    cli_args = ["--model", "gpt3-1.3b", "--cluster", "a100-80g", "--gpus", "16", "--pp", "2",
                "--dp", "8", "--global-batch", "64", "--schedule", "1f1b", "--zero1"]
    sharded = js.simulate(**args, shard_params=True)
    assert sharded.metrics == cli_json("simulate", *cli_args, "--shard-params")
    assert sharded.plan["config"]["shard_parameters"] is True
    assert sharded.plan["config"]["shard_gradients"] is True
    # Sharded weights: less memory than gradient sharding alone.
    zero2 = js.simulate(**args, shard_grads=True)
    assert sum(sharded.metrics["peak_memory_bytes"]) < sum(zero2.metrics["peak_memory_bytes"])
    no_zero1 = dict(args, zero1=False)
    same_error(lambda: js.simulate(**no_zero1, shard_params=True), "simulate", *cli_args[:-1],
               "--shard-params")
    with pytest.raises(js.InputError, match="--shard-params"):
        js.simulate(schedule="1f1b", pp=2, microbatches=4, t_f=1, t_b=1, shard_params=True)
    g = js.graph(model="gpt3-1.3b", pp=2, partition="balanced-time", schedule="1f1b", dp=8,
                 zero1=True, shard_params=True)
    assert g == cli_json("graph", "--model", "gpt3-1.3b", "--pp", "2", "--partition",
                         "balanced-time", "--schedule", "1f1b", "--dp", "8", "--zero1",
                         "--shard-params")
    same_error(lambda: js.graph(model="gpt3-1.3b", pp=2, shard_params=True), "graph",
               "--model", "gpt3-1.3b", "--pp", "2", "--shard-params")
    r = js.explore(model="gpt3-1.3b", cluster="a100-80g", gpus=16, global_batch=64, pp=[2],
                   tp=[1], schedules=["1f1b"], zero1="on", shard_params="on", threads=1)
    assert r.summary == cli_json("explore", "--model", "gpt3-1.3b", "--cluster", "a100-80g",
                                 "--gpus", "16", "--global-batch", "64", "--pp", "2", "--tp", "1",
                                 "--schedules", "1f1b", "--zero1", "on", "--shard-params", "on",
                                 "--threads", "1")
    assert r.best_plan()["config"]["shard_parameters"] is True


def test_a2a_dtype_equals_cli():
    args = dict(model="mixtral-8x7b", cluster="h100-sxm", gpus=16, pp=2, tp=2, dp=4, ep=4,
                global_batch=64, schedule="1f1b", sequence_parallel=True, trace=False,
                check_memory=False)
    cli_args = ["--model", "mixtral-8x7b", "--cluster", "h100-sxm", "--gpus", "16", "--pp", "2",
                "--tp", "2", "--dp", "4", "--ep", "4", "--global-batch", "64", "--schedule",
                "1f1b", "--sequence-parallel", "--no-memory-check"]
    fp8 = js.simulate(**args, a2a_dtype="fp8,bf16")
    assert fp8.metrics == cli_json("simulate", *cli_args, "--a2a-dtype", "fp8,bf16")
    assert fp8.metrics != js.simulate(**args).metrics
    same_error(lambda: js.simulate(**args, a2a_dtype="fp4"), "simulate", *cli_args,
               "--a2a-dtype", "fp4")


def test_simulate_op_recompute_equals_cli_and_sits_between_selective_and_full():
    # torchtitan's op-level selective checkpointing: the same metrics as the CLI; it re-runs more
    # than selective (GEMMs and element-wise kernels) and keeps more than full.
    op = js.simulate(**PARTITION_SIM, recompute="op")
    assert op.metrics == cli_json("simulate", *PARTITION_SIM_CLI, "--recompute", "op")
    assert op.plan["config"]["recompute"] == "op"
    selective = js.simulate(**PARTITION_SIM, recompute="selective")
    full = js.simulate(**PARTITION_SIM, recompute="full")
    assert selective.step_time_s < op.step_time_s < full.step_time_s
    assert (max(full.metrics["peak_memory_bytes"]) < max(op.metrics["peak_memory_bytes"])
            < max(selective.metrics["peak_memory_bytes"]))
    same_error(lambda: js.simulate(**PARTITION_SIM, recompute="opp"), "simulate",
               *PARTITION_SIM_CLI, "--recompute", "opp")


def test_arguments_of_the_wrong_type_are_named():
    # int() truncated pp=2.5 to 2 in silence; a list reached pybind, whose TypeError named its
    # internal function (simulate_measured) and not the argument.
    measured = dict(schedule="1f1b", pp=2, microbatches=4, t_f=1.0, t_b=2.0)
    for name, bad, what in (("pp", 2.5, "an integer"), ("microbatches", [4], "an integer"),
                            ("t_f", "fast", "a number"), ("pp", True, "an integer")):
        with pytest.raises(js.InputError) as e:
            js.simulate(**{**measured, name: bad})
        assert str(e.value) == f"{name}: expected {what}, got {bad!r}"
    with pytest.raises(js.InputError) as e:
        js.simulate(model="gpt3-1.3b", gpus="eight", pp=2, global_batch=8)
    assert str(e.value) == "gpus: expected an integer, got 'eight'"
    # What int() and float() read before is still read: integral floats, numpy scalars, text.
    import numpy as np
    plain = js.simulate(**measured)
    assert js.simulate(**{**measured, "pp": np.int64(2), "microbatches": 4.0,
                          "t_f": "1"}).step_time_s == plain.step_time_s


def test_show_with_zero_microbatches_says_what_the_cli_says():
    # It said "--microbatches: required" (0 stood for "not given").
    same_error(lambda: js.show(schedule="1f1b", pp=2, microbatches=0), "show", "--schedule",
               "1f1b", "--pp", "2", "--microbatches", "0")
    with pytest.raises(js.InputError, match="^--microbatches: required$"):
        js.show(schedule="1f1b", pp=2)


def test_nan_inside_a_dict_is_named_where_it_is():
    # json.dumps wrote NaN and the core's parser reported a position in that text.
    cluster = js.Cluster.load("h100-sxm").to_dict()
    cluster["intra_node"]["latency_us"] = float("nan")
    with pytest.raises(js.InputError) as e:
        js.Cluster.from_dict(cluster, "mine")
    assert str(e.value) == ("mine: field 'intra_node': field 'latency_us': expected a finite "
                            "number, got nan (JSON has no NaN or infinity)")
    stage_times = {"stages": [{"t_f_ms": 1.0, "t_b_ms": float("inf")}]}
    with pytest.raises(js.InputError) as e:
        js.simulate(schedule="1f1b", pp=1, microbatches=2, stage_times=stage_times)
    assert str(e.value) == ("stage_times: stages[0]: field 't_b_ms': expected a finite number, "
                            "got inf (JSON has no NaN or infinity)")


# --- empty values, list arguments, constructors, non-finite floats --------------------------------

SMALL_SIM = dict(model="gpt3-1.3b", cluster="h100-sxm", gpus=8, pp=2, global_batch=16,
                 schedule="1f1b")
SMALL_SIM_CLI = ["--model", "gpt3-1.3b", "--cluster", "h100-sxm", "--gpus", "8", "--pp", "2",
                 "--global-batch", "16", "--schedule", "1f1b"]
SMALL_EXPLORE = dict(model="gpt3-1.3b", cluster="h100-sxm", gpus=8, global_batch=16)
SMALL_EXPLORE_CLI = ["--model", "gpt3-1.3b", "--cluster", "h100-sxm", "--gpus", "8",
                     "--global-batch", "16"]


def test_empty_values_are_refused_as_the_cli_refuses_them():
    # "" and [] meant "not given" (x or "", list(x or [])); only None does.
    for modules in ([], "", [""]):
        same_error(lambda: js.simulate(**SMALL_SIM, recompute="selective",
                                       recompute_modules=modules),
                   "simulate", *SMALL_SIM_CLI, "--recompute", "selective",
                   "--recompute-modules", ",")
    same_error(lambda: js.graph(model="gpt3-1.3b", pp=2, recompute="selective",
                                recompute_modules=[]),
               "graph", "--model", "gpt3-1.3b", "--pp", "2", "--recompute", "selective",
               "--recompute-modules", "")
    same_error(lambda: js.simulate(**SMALL_SIM, perturb=""), "simulate", *SMALL_SIM_CLI,
               "--perturb", "")
    same_error(lambda: js.simulate(**SMALL_SIM, perturb="", breakdown=True), "simulate",
               *SMALL_SIM_CLI, "--perturb", "", "--breakdown")
    same_error(lambda: js.simulate(schedule="1f1b", pp=2, microbatches=4, t_f=1, t_b=1,
                                   perturb=""),
               "simulate", "--schedule", "1f1b", "--pp", "2", "--microbatches", "4", "--t-f",
               "1", "--t-b", "1", "--perturb", "")
    same_error(lambda: js.simulate(**SMALL_SIM, assign=""), "simulate", *SMALL_SIM_CLI,
               "--assign", "")
    same_error(lambda: js.explore(**SMALL_EXPLORE, assign=""), "explore", *SMALL_EXPLORE_CLI,
               "--assign", "")
    for name in ("schedules", "pp", "tp", "ep", "etp", "cp", "microbatch_sizes", "virtual",
                 "recompute", "offload_layers"):
        for empty in ([], "", ()):
            same_error(lambda: js.explore(**SMALL_EXPLORE, **{name: empty}), "explore",
                       *SMALL_EXPLORE_CLI, "--" + name.replace("_", "-"), "")
    same_error(lambda: js.validate_model(rows_on=""), "validate-model", "--rows-on", "")
    same_error(lambda: js.validate_model(corpus=""), "validate-model", "--corpus", "")


def test_explore_list_arguments_take_one_value_or_the_clis_text():
    # schedules="1f1b" was split into characters ("unknown schedule '1'"), pp=2 raised a bare
    # TypeError and pp="2" pybind's "incompatible function arguments".
    args = dict(SMALL_EXPLORE, microbatch_sizes=[2], tp=[1], zero1="off", recompute=["none"],
                threads=1)
    cli = [*SMALL_EXPLORE_CLI, "--microbatch-sizes", "2", "--tp", "1", "--zero1", "off",
           "--recompute", "none", "--threads", "1", "--quiet"]
    c = cli_json("explore", *cli, "--schedules", "1f1b,zb-h1", "--pp", "2,4")
    for schedules, pp in ((["1f1b", "zb-h1"], [2, 4]), ("1f1b,zb-h1", "2,4"),
                          (("1f1b", "zb-h1"), ("2", 4.0))):
        r = js.explore(**args, schedules=schedules, pp=pp)
        assert r.summary["configs"] == c["configs"]
    c = cli_json("explore", *cli, "--schedules", "1f1b", "--pp", "2")
    for pp in (2, "2", [2]):
        r = js.explore(**args, schedules="1f1b", pp=pp)
        assert r.summary["configs"] == c["configs"]
    for text in ("2.5", ",2", "0", "2,x"):
        same_error(lambda: js.explore(**args, pp=text), "explore", *cli, "--pp", text)
    # no empty item after a final comma, as the CLI splits it
    assert js.explore(**args, schedules="1f1b,", pp=2).summary["configs"] == c["configs"]
    for name, bad, what in (("pp", 2.5, "an integer or a list of integers"),
                            ("tp", {"a": 1}, "an integer or a list of integers"),
                            ("virtual", True, "an integer or a list of integers"),
                            ("schedules", {"1f1b": 1}, "a string or a list of strings"),
                            ("recompute", ["none", 1], "a string or a list of strings"),
                            ("offload_layers", 1.5, "an integer, a string or a list of them")):
        with pytest.raises(js.InputError) as e:
            js.explore(**{**args, name: bad})
        assert str(e.value) == f"{name}: expected {what}, got {bad!r}"
    with pytest.raises(js.InputError) as e:
        js.explore(**args, pp=[2, 2.5])
    assert str(e.value) == "pp: expected an integer, got 2.5"


def test_model_and_cluster_constructors_take_a_checked_dict():
    # Model("gpt3-1.3b") raised ValueError from dict(), Cluster(None) a TypeError, and
    # Model({'name': 5}) was accepted unchecked.
    for cls, name in ((js.Model, "gpt3-1.3b"), (js.Cluster, "h100-sxm")):
        kind = cls.__name__
        for bad in (name, None, ["x"]):
            with pytest.raises(js.InputError) as e:
                cls(bad)
            assert str(e.value) == (
                f"{kind}({bad!r}): expected a dict in the {kind.lower()} JSON format; use "
                f"{kind}.load(name_or_path) for a preset or a file, {kind}.from_dict(doc) for "
                "a dict")
        doc = cls.load(name).to_dict()
        assert cls(doc).to_dict() == doc  # a dict of the core's format, as before
        for source in (None, 5):
            with pytest.raises(js.InputError) as e:
                cls.from_dict(doc, source=source)
            assert str(e.value) == f"source: expected a string, got {source!r}"
    with pytest.raises(js.InputError) as e:
        js.Cluster({"name": 5})
    assert str(e.value) == "cluster: field 'name': expected a string, got 5"
    with pytest.raises(js.InputError, match="^model: field 'layers': missing"):
        js.Model({"name": 5})


def test_non_finite_seconds_and_factors_are_refused_up_front():
    # calibrate(timeout_s=nan) ran the benchmarks and failed seconds later with a RuntimeError;
    # run(timeout_s=nan) named a range the CLI never reaches.
    nan, inf = float("nan"), float("inf")
    for kw, flag, text in ((dict(timeout_s=nan), "--timeout-s", "nan"),
                           (dict(timeout_s=-inf), "--timeout-s", "-inf"),
                           (dict(timeout_s="NaN"), "--timeout-s", "NaN"),
                           (dict(timeout_s="1e400"), "--timeout-s", "1e400"),
                           (dict(repetition_ms=inf), "--repetition-ms", "inf")):
        same_error(lambda: js.calibrate(quick=True, **kw), "calibrate", "--quick", flag, text)
    same_error(lambda: js.calibrate(from_trace="x.json", timeout_s=nan), "calibrate",
               "--from-trace", "x.json", "--timeout-s", "nan")
    measured = ["--schedule", "1f1b", "--pp", "2", "--microbatches", "4"]
    for kw, flag, text in ((dict(timeout_s=nan), "--timeout-s", "nan"),
                           (dict(time_scale=inf), "--time-scale", "inf"),
                           (dict(time_scale=-inf), "--time-scale", "-inf")):
        same_error(lambda: js.run(schedule="1f1b", pp=2, microbatches=4, **kw), "run",
                   *measured, flag, text)


def test_integers_beyond_the_cores_type_name_the_argument():
    # pybind's TypeError ("simulate_measured(): incompatible function arguments") named no
    # argument for an integer beyond C++ int (sweep 5).
    for call, message in (
            (lambda: js.show(schedule="1f1b", pp=2, microbatches=2**40),
             "microbatches: expected an integer in [-2147483648, 2147483647], got 1099511627776"),
            (lambda: js.simulate(schedule="1f1b", pp=2**33, microbatches=4, t_f=1, t_b=1),
             "pp: expected an integer in [-2147483648, 2147483647], got 8589934592")):
        with pytest.raises(js.InputError) as e:
            call()
        assert str(e.value) == message
    # A 64-bit argument keeps its range: seed is unsigned 64-bit.
    assert js._int("seed", 2**63, 64, signed=False) == 2**63
    with pytest.raises(js.InputError) as e:
        js._int("seed", -1, 64, signed=False)
    assert str(e.value) == "seed: expected an integer in [0, 18446744073709551615], got -1"

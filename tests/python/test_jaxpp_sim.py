"""Tests of the Python module jaxpp_sim against the jaxpp-sim binary (same library, same numbers).

Run by ctest (tests/CMakeLists.txt) with PYTHONPATH=<build>/python, JAXPP_SIM_BINARY and
JAXPP_SOURCE_DIR set.
"""

import json
import os
import pydoc
import subprocess
import sys
import threading
import time

import pytest

import jaxpp_sim as js
from cli_helpers import cli, cli_error, cli_json

SOURCE = os.environ["JAXPP_SOURCE_DIR"]
DATA = os.path.join(SOURCE, "tests", "data")


# --- simulate -------------------------------------------------------------------------------------

def test_measured_simulate_equals_cli():
    r = js.simulate(schedule="zb-h1", pp=4, microbatches=8, t_f=1, t_b=1, t_w=1)
    c = cli_json("simulate", "--schedule", "zb-h1", "--pp", "4", "--microbatches", "8",
                 "--t-f", "1", "--t-b", "1", "--t-w", "1")
    assert r.step_time_s == c["step_time_s"]
    assert r.bubble_rate == c["bubble_rate"]
    assert r.metrics == c
    # The Zero Bubble paper's unit-cost check (costmodel/stage_times_cost.h): 27 units of 1 ms.
    assert r.step_time_s == pytest.approx(27e-3)
    assert len(r.actors) == 4
    assert r.mfu is None
    assert r.trace and {"actor", "op", "start_s", "end_s"} <= set(r.trace[0])


def test_model_simulate_equals_cli():
    args = dict(model="gpt3-13b", cluster="h100-sxm", gpus=64, pp=4, tp=8, dp=2,
                global_batch=64, schedule="zb-h1")
    r = js.simulate(**args, breakdown=True)
    c = cli_json("simulate", "--model", "gpt3-13b", "--cluster", "h100-sxm", "--gpus", "64",
                 "--pp", "4", "--tp", "8", "--dp", "2", "--global-batch", "64", "--schedule",
                 "zb-h1", "--breakdown")
    assert r.step_time_s == c["step_time_s"]
    assert r.bubble_rate == c["bubble_rate"]
    assert r.mfu == c["mfu"]
    assert r.breakdown == c["breakdown"]
    df = r.to_pandas()
    assert list(df["actor"]) == [0, 1, 2, 3]
    assert "gemm_s" in df.columns and "busy_s" in df.columns
    assert r.plan["predicted"]["step_time_s"] == r.step_time_s
    # The same with Model/Cluster objects and from dicts.
    m = js.Model.load("gpt3-13b")
    c2 = js.Cluster.from_dict(js.Cluster.load("h100-sxm").to_dict())
    r2 = js.simulate(**{**args, "model": js.Model.from_dict(m.to_dict()), "cluster": c2},
                     trace=False)
    assert r2.step_time_s == r.step_time_s
    assert r2.trace == []


def test_jaxpp_schedule_names_are_accepted():
    base = dict(pp=4, microbatches=8, t_f=1, t_b=1, t_w=1, trace=False)
    assert (js.simulate(schedule="ZeroBubble", **base).step_time_s
            == js.simulate(schedule="zb-h1", **base).step_time_s)
    for name in ("Std1F1B", "Eager1F1B", "GPipe", "Interleaved1F1B", "InterleavedGPipe",
                 "DualPipeV", "KimiK2"):
        # virtual left out for the others: DualPipeV runs its 2 stages per actor (a given
        # virtual=1 is refused, as the CLI's --virtual 1)
        r = js.simulate(schedule=name, **{**base, "virtual": 2 if "Interleaved" in name
                                          or name == "KimiK2" else None})
        assert r.step_time_s > 0, name


def test_input_errors_carry_the_cli_message():
    with pytest.raises(js.InputError) as e:
        js.simulate(schedule="no-such-schedule", pp=4, microbatches=8, t_f=1, t_b=1)
    assert isinstance(e.value, ValueError)
    assert str(e.value) == cli_error("simulate", "--schedule", "no-such-schedule", "--pp", "4",
                                     "--microbatches", "8", "--t-f", "1", "--t-b", "1")
    with pytest.raises(js.InputError) as e:
        js.simulate(schedule="1f1b", pp=0, microbatches=8, t_f=1, t_b=1)
    assert str(e.value) == cli_error("simulate", "--schedule", "1f1b", "--pp", "0",
                                     "--microbatches", "8", "--t-f", "1", "--t-b", "1")
    with pytest.raises(js.InputError) as e:
        js.Cluster.load("h900")
    assert str(e.value) == cli_error("simulate", "--model", "gpt3-13b", "--cluster", "h900",
                                     "--gpus", "8", "--pp", "1", "--global-batch", "8",
                                     "--schedule", "1f1b")
    with pytest.raises(js.InputError) as e:
        js.Model.load("gpt-nope")
    assert str(e.value) == cli_error("graph", "--model", "gpt-nope", "--pp", "1")
    with pytest.raises(js.InputError) as e:
        js.simulate(model="gpt3-13b", cluster="h100-sxm", gpus=64, pp=4, tp=8, dp=3,
                    global_batch=64, schedule="1f1b")
    assert str(e.value) == cli_error("simulate", "--model", "gpt3-13b", "--cluster", "h100-sxm",
                                     "--gpus", "64", "--pp", "4", "--tp", "8", "--dp", "3",
                                     "--global-batch", "64", "--schedule", "1f1b")


def test_version_is_the_cli_version():
    code, out, _ = cli("--version")
    assert code == 0 and js.__version__ in out.splitlines()[0]


def test_models_clusters_schedules_match_the_cli():
    assert "gpt3-13b" in js.models() and "deepseek-v3" in js.models()
    assert "h100-sxm" in js.clusters()
    assert js.schedules() == cli_json("schedules")


def test_hugging_face_config_from_path_and_dict():
    path = os.path.join(DATA, "hf", "llama3-8b.json")
    a = js.Model.load(path)
    with open(path, encoding="utf-8") as f:
        b = js.Model.from_dict(json.load(f), source=path)
    assert a.to_dict() == b.to_dict()
    graph = cli_json("graph", "--model", path, "--pp", "1")
    assert a.name == graph["model"] == "llama3-8b"
    assert a.shape()["hidden"] == 4096
    # The totals graph --json reports (they were missing).
    g = cli_json("graph", "--model", "gpt3-1.3b", "--pp", "1")
    shape = js.Model.load("gpt3-1.3b").shape()
    for key in ("params", "active_params", "mtp_params"):
        assert shape[key] == g[key], key
    r = js.simulate(model=a, cluster="h100-sxm", gpus=8, pp=2, tp=4, global_batch=8,
                    schedule="1f1b", trace=False)
    c = cli_json("simulate", "--model", path, "--cluster", "h100-sxm", "--gpus", "8", "--pp",
                 "2", "--tp", "4", "--global-batch", "8", "--schedule", "1f1b")
    assert r.step_time_s == c["step_time_s"] and r.mfu == c["mfu"]


# --- explore --------------------------------------------------------------------------------------

EXPLORE_ARGS = ["--model", "gpt3-13b", "--cluster", "h100-sxm", "--gpus", "16",
                "--global-batch", "64", "--pp", "2,4", "--schedules", "1f1b,zb-h1,gpipe"]


def small_explore(**kw):
    return js.explore(model="gpt3-13b", cluster="h100-sxm", gpus=16, global_batch=64,
                      pp=[2, 4], schedules=["1f1b", "zb-h1", "gpipe"], **kw)


def test_explore_ranking_equals_cli_and_progress_is_called():
    calls = []
    r = small_explore(progress=lambda done, total: calls.append((done, total)))
    c = cli_json("explore", *EXPLORE_ARGS, "--quiet")
    ranked = [x for x in c["configs"] if "rank" in x]
    assert len(ranked) > 3
    assert [x["id"] for x in r.ranked] == [x["id"] for x in ranked]
    assert [x["step_time_s"] for x in r.ranked] == [x["step_time_s"] for x in ranked]
    assert r.configs == c["configs"]
    assert r.best == c["best"]
    assert r.pareto == c["pareto"]
    assert calls, "the progress callback was never called"
    assert calls[-1][0] == calls[-1][1]
    assert all(a[0] <= b[0] for a, b in zip(calls, calls[1:]))
    df = r.to_pandas()
    assert len(df) == len(r.ranked) and "step_time_s" in df.columns and "pp" in df.columns
    plan = r.best_plan()
    assert plan["predicted"]["step_time_s"] == r.best["step_time_s"]


def test_explore_progress_exception_propagates():
    def boom(done, total):
        raise KeyError("from the callback")
    with pytest.raises(KeyError):
        small_explore(progress=boom)


def test_explore_nothing_fits_is_the_cli_error():
    with pytest.raises(js.InputError) as e:
        small_explore(max_memory_gib=1)
    assert str(e.value) == cli_error("explore", *EXPLORE_ARGS, "--max-memory-gib", "1",
                                     "--quiet")


def test_explore_releases_the_gil():
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.001)

    t = threading.Thread(target=ticker)
    t.start()
    time.sleep(0.05)
    start = time.monotonic()
    # About 0.6 s of one core: long enough to tell, short enough for the suite.
    js.explore(model="gpt3-13b", cluster="h100-sxm", gpus=64, global_batch=256, threads=1,
               schedules=["1f1b", "zb-h1", "interleaved1f1b"])
    end = time.monotonic()
    stop.set()
    t.join()
    during = [x for x in ticks if start < x < end]
    assert end - start > 0.2, "the exploration is too short to tell"
    # Without releasing the GIL the ticker could not run at all while explore works.
    assert len(during) >= 0.2 * (end - start) / 0.001 * 0.1, (len(during), end - start)


# --- show, validate, export, run ------------------------------------------------------------------

def test_show_equals_cli():
    s = js.show(schedule="dualpipev", pp=4, microbatches=8)
    c = cli_json("show", "--schedule", "dualpipev", "--pp", "4", "--microbatches", "8")
    for key in c:
        assert s[key] == c[key], key
    assert s["ok"] and "actor" in s["timeline_text"]


def test_validate_equals_cli():
    good = os.path.join(DATA, "schedules", "1f1b_p2_m4.csv")
    bad = os.path.join(DATA, "schedules", "deadlock.json")
    assert js.validate(good) == cli_json("validate", good)
    v = js.validate(bad)
    assert v["ok"] is False and v["errors"]
    code, out, _ = cli("validate", bad, "--json")
    assert code == 1 and json.loads(out) == v
    with pytest.raises(js.InputError) as e:
        js.validate(os.path.join(DATA, "schedules", "malformed.json"))
    assert str(e.value) == cli_error("validate", os.path.join(DATA, "schedules", "malformed.json"))


def test_export_svg_and_perfetto(tmp_path):
    r = js.simulate(schedule="1f1b", pp=4, microbatches=8, t_f=1, t_b=1)
    svg = js.export(r, "svg")
    assert svg.lstrip().startswith("<") and "<svg" in svg
    perfetto = json.loads(js.export(r, "perfetto"))
    events = perfetto["traceEvents"] if isinstance(perfetto, dict) else perfetto
    assert sum(1 for e in events if e.get("ph") == "X") == len(r.trace)
    # The CLI's export of the same trace gives the same text.
    trace_file = tmp_path / "t.json"
    trace_file.write_text(json.dumps(r.trace_json()))
    out = tmp_path / "t.svg"
    code, _, err = cli("export", "--trace", str(trace_file), "-o", str(out))
    assert code == 0, err
    assert out.read_text() == svg
    png = js.export(r, "png")
    assert isinstance(png, bytes) and png[:8] == b"\x89PNG\r\n\x1a\n"
    assert js.export(r, "dot").startswith("digraph")
    with pytest.raises(js.InputError):
        js.export(r, "gif")
    # A measured run's trace exports too.
    run = js.run(schedule="1f1b", pp=2, microbatches=4, steps=1)
    assert "<svg" in js.export(run, "svg")


def test_run_threads_with_check():
    r = js.run(schedule="1f1b", pp=2, microbatches=4, check=True, steps=2)
    assert r.check_passed
    assert len(r.losses) == 2
    assert r.report["reference"]["passed"]
    assert r.trace


def test_run_plan_from_simulate_emulated():
    sim = js.simulate(model="gpt3-13b", cluster="h100-sxm", gpus=64, pp=4, tp=8, dp=2,
                      global_batch=64, schedule="1f1b", trace=False)
    r = js.run(sim.plan, compute="emulated", time_scale=0.001, steps=1, warmup=0)
    assert r.report["dp"] == 2
    assert r.step_time_s > 0


@pytest.mark.parametrize("kwargs, flags", [
    (dict(steps=0), ["--steps", "0"]),
    (dict(warmup=-1), ["--warmup", "-1"]),
    (dict(hidden=0), ["--hidden", "0"]),
    (dict(seq=1 << 23), ["--seq", str(1 << 23)]),
    (dict(timeout_s=0), ["--timeout-s", "0"]),
    (dict(time_scale=-1), ["--time-scale", "-1"]),
    (dict(compute="gpu"), ["--compute", "gpu"]),
    (dict(optimizer="lion"), ["--optimizer", "lion"]),
])
def test_run_argument_checks_are_the_cli_checks(kwargs, flags):
    with pytest.raises(js.InputError) as e:
        js.run(schedule="1f1b", pp=2, microbatches=4, **kwargs)
    assert str(e.value) == cli_error("run", "--schedule", "1f1b", "--pp", "2", "--microbatches",
                                     "4", *flags)


def test_run_refuses_program_arguments_a_plan_or_schedule_file_fixes(tmp_path):
    # They were ignored: dp=3 ran the plan's dp 2, pp and microbatches ran the plan's program.
    sim = js.simulate(model="gpt3-1.3b", gpus=4, pp=2, dp=2, global_batch=8, schedule="1f1b",
                      trace=False)
    path = str(tmp_path / "p.json")
    with open(path, "w") as f:
        json.dump(sim.plan, f)
    for kwargs, flags in ((dict(dp=3), ["--dp", "3"]), (dict(pp=2), ["--pp", "2"]),
                          (dict(microbatches=8), ["--microbatches", "8"]),
                          (dict(fuse_steady_state=True), ["--fuse-steady-state"])):
        with pytest.raises(js.InputError) as e:
            js.run(path, compute="emulated", **kwargs)
        assert str(e.value) == cli_error("run", path, "--compute", "emulated", *flags)
    sched = os.path.join(DATA, "schedules", "1f1b_p2_m4.csv")
    with pytest.raises(js.InputError) as e:
        js.run(schedule_file=sched, pp=2)
    assert str(e.value) == cli_error("run", "--schedule-file", sched, "--pp", "2")


def test_options_the_output_would_ignore_are_refused_as_the_cli_refuses_them(tmp_path):
    # Sweep 7: they were accepted and ignored (export's title on text, width on perfetto,
    # width -1 drew 100 columns; show's pp with a schedule file; calibrate's name "").
    sim = js.simulate(schedule="1f1b", pp=2, microbatches=4, t_f=1, t_b=1)
    trace = str(tmp_path / "t.json")
    with open(trace, "w") as f:
        json.dump(sim.trace_json(), f)
    for kwargs, fmt, flags in ((dict(title="x"), "text", ["--title", "x"]),
                               (dict(width=200), "perfetto", ["--width", "200"]),
                               (dict(per_stream=True), "json", ["--per-stream"]),
                               (dict(width=-1), "text", ["--width", "-1"]),
                               (dict(width=10 ** 6), "svg", ["--width", str(10 ** 6)])):
        with pytest.raises(js.InputError) as e:
            js.export(sim, fmt, **kwargs)
        out = str(tmp_path / ("x." + ("txt" if fmt == "text" else fmt)))
        assert str(e.value) == cli_error("export", "--trace", trace, "--format", fmt, "-o", out,
                                         *flags)
    sched = os.path.join(DATA, "schedules", "1f1b_p2_m4.csv")
    for kwargs, flags in ((dict(pp=2), ["--pp", "2"]), (dict(stages=4), ["--stages", "4"]),
                          (dict(group_size=2), ["--group-size", "2"])):
        with pytest.raises(js.InputError) as e:
            js.show(schedule_file=sched, **kwargs)
        assert str(e.value) == cli_error("show", "--schedule-file", sched, *flags)
    run = js.run(schedule="1f1b", pp=2, steps=2, warmup=0, hidden=8, seq=4, layers_per_stage=1)
    run_trace = str(tmp_path / "run.json")
    with open(run_trace, "w") as f:
        json.dump(run.trace_json(), f)
    with pytest.raises(js.InputError) as e:
        js.calibrate(from_trace=run_trace, name="")
    assert str(e.value) == cli_error("calibrate", "--from-trace", run_trace, "--name", "")


def test_simulate_keeps_or_refuses_a_given_virtual_and_has_the_moe_limits():
    with pytest.raises(js.InputError) as e:
        js.simulate(model="gpt3-1.3b", gpus=4, pp=2, dp=2, global_batch=16, schedule="zb-v",
                    virtual=1)
    assert str(e.value) == cli_error("simulate", "--model", "gpt3-1.3b", "--gpus", "4", "--pp",
                                     "2", "--dp", "2", "--global-batch", "16", "--schedule",
                                     "zb-v", "--virtual", "1")
    with pytest.raises(js.InputError) as e:
        js.simulate(schedule="zb-v", pp=2, microbatches=4, t_f=1, t_b=1, virtual=1)
    assert str(e.value) == cli_error("simulate", "--schedule", "zb-v", "--pp", "2",
                                     "--microbatches", "4", "--t-f", "1", "--t-b", "1",
                                     "--virtual", "1")
    # Left out, the V schedule takes its 2 stages per actor.
    sim = js.simulate(model="gpt3-1.3b", gpus=4, pp=2, dp=2, global_batch=16, schedule="zb-v",
                      trace=False)
    assert sim.plan["config"]["virtual_stages"] == 2
    # --moe-device-limit reaches the core (it was missing): the step equals the CLI's.
    args = ["--model", "deepseek-v3", "--cluster", "h100-sxm", "--gpus", "256", "--pp", "8",
            "--dp", "32", "--ep", "32", "--global-batch", "256", "--schedule", "1f1b",
            "--no-memory-check", "--moe-device-limit", "3"]
    cli_step = cli_json("simulate", *args)["step_time_s"]
    kwargs = dict(model="deepseek-v3", cluster="h100-sxm", gpus=256, pp=8, dp=32, ep=32,
                  global_batch=256, schedule="1f1b", check_memory=False, trace=False)
    limited = js.simulate(moe_device_limit=3, **kwargs).metrics["step_time_s"]
    assert limited == pytest.approx(cli_step, rel=1e-12)
    assert limited != js.simulate(**kwargs).metrics["step_time_s"]


def test_simulate_conflicts_name_both_flags_as_the_cli():
    sched = os.path.join(DATA, "schedules", "1f1b_p2_m4.csv")
    with pytest.raises(js.InputError) as e:
        js.simulate(schedule="1f1b", schedule_file=sched)
    assert str(e.value) == cli_error("simulate", "--schedule", "1f1b", "--schedule-file", sched)
    with pytest.raises(js.InputError) as e:
        js.simulate(schedule="1f1b", pp=2, stage_times={"t_f_ms": [1, 1], "t_b_ms": [1, 1]},
                    t_w=1)
    assert str(e.value).startswith("--stage-times and --t-w: give per-stage times in a file or "
                                   "uniform times, not both")


def test_export_refuses_stdout_as_the_torchtitan_csv():
    # It wrote a file named "-" (the CLI writes the CSV to its standard output).
    sim = js.simulate(model="gpt3-1.3b", gpus=2, pp=2, global_batch=4, schedule="1f1b",
                      trace=False)
    with pytest.raises(js.InputError) as e:
        js.export(sim, "torchtitan", csv_path="-")
    assert str(e.value).startswith("csv_path: '-' is the CLI's standard output")
    assert not os.path.exists("-")


def test_run_takes_the_clis_defaults_and_checks():
    # The CLI's --microbatches defaults to 4 (Python raised "needs m >= 1").
    r = js.run(schedule="1f1b", pp=2, steps=1, warmup=0)
    assert r.report["num_microbatches"] == 4
    with pytest.raises(js.InputError) as e:
        js.run(schedule="1f1b", pp=2, virtual=0)
    assert str(e.value) == cli_error("run", "--schedule", "1f1b", "--pp", "2", "--virtual", "0")


@pytest.mark.parametrize("kwargs, flags", [
    (dict(compute="emulated", hidden=16), ["--compute", "emulated", "--hidden", "16"]),
    (dict(compute="emulated", seed=7), ["--compute", "emulated", "--seed", "7"]),
    (dict(compute="emulated", optimizer="adam"), ["--compute", "emulated", "--optimizer", "adam"]),
    (dict(time_scale=2.0), ["--time-scale", "2"]),
])
def test_run_refuses_what_the_chosen_compute_cannot_use(kwargs, flags):
    # They were ignored: the MLP workload's arguments with emulated compute, the time scale with
    # real compute.
    with pytest.raises(js.InputError) as e:
        js.run(schedule="1f1b", pp=2, microbatches=4, steps=1, warmup=0, **kwargs)
    assert str(e.value) == cli_error("run", "--schedule", "1f1b", "--pp", "2", "--microbatches",
                                     "4", "--steps", "1", "--warmup", "0", *flags)


def test_other_argument_checks():
    with pytest.raises(js.InputError) as e:
        small_explore(zero1="maybe")
    assert str(e.value) == cli_error("explore", *EXPLORE_ARGS, "--zero1", "maybe", "--quiet")
    with pytest.raises(js.InputError) as e:
        small_explore(threads=-1)
    assert str(e.value) == cli_error("explore", *EXPLORE_ARGS, "--threads", "-1", "--quiet")
    with pytest.raises(js.InputError) as e:
        js.simulate(model="gpt3-13b", gpus=8, pp=1, global_batch=8, schedule="1f1b", t_f=1)
    assert str(e.value) == cli_error("simulate", "--model", "gpt3-13b", "--gpus", "8", "--pp", "1",
                                     "--global-batch", "8", "--schedule", "1f1b", "--t-f", "1")
    with pytest.raises(js.InputError) as e:
        js.simulate(model="gpt3-13b", pp=1, global_batch=8, schedule="1f1b")
    assert str(e.value) == cli_error("simulate", "--model", "gpt3-13b", "--pp", "1",
                                     "--global-batch", "8", "--schedule", "1f1b")
    with pytest.raises(js.InputError) as e:
        js.export(js.simulate(schedule="1f1b", pp=2, microbatches=4, t_f=1, t_b=1, trace=False))
    assert "no trace" in str(e.value)
    with pytest.raises(js.InputError) as e:
        js.show(schedule="1f1b")
    assert str(e.value) == cli_error("show", "--schedule", "1f1b")


def test_run_refuses_a_deadlocked_schedule():
    path = os.path.join(DATA, "schedules", "deadlock.json")
    with pytest.raises(js.InputError) as e:
        js.run(schedule_file=path)
    assert str(e.value) == cli_error("run", "--schedule-file", path)


def test_run_failure_raises_runtime_error_with_the_cli_message():
    with pytest.raises(RuntimeError) as e:
        js.run(schedule="1f1b", pp=2, microbatches=4, inject_drop=0, timeout_s=0.5)
    assert not isinstance(e.value, ValueError)
    code, _, err = cli("run", "--schedule", "1f1b", "--pp", "2", "--microbatches", "4",
                       "--inject-drop", "0", "--timeout-s", "0.5")
    assert code == 1
    # Which actor times out first depends on timing, so the two runs are compared by the form
    # of their one-line message: "actor A (replica R), step S, instruction I '...': timed out
    # after 0.5 s waiting for tag T from actor P (message lost, or the peer dead or still
    # busy: ...)".
    line = err.strip().splitlines()[-1]
    assert line.startswith("jaxpp-sim run: error: actor ")
    for msg in (line, str(e.value)):
        assert "timed out after 0.5 s waiting for tag" in msg, msg
        assert msg.endswith("(message lost, or the peer dead or still busy: if its work takes "
                            "longer, give a larger --timeout-s)"), msg
    assert str(e.value).startswith("actor ")


# --- argument types and input files -----------------------------------------------------------

def _finishes(call, seconds=60):
    """call() on a thread: its InputError, or None when it returned; fails the test when the call
    has not finished after ``seconds`` (open() of a FIFO blocked for ever)."""
    out = {}

    def target():
        try:
            call()
        except BaseException as e:  # noqa: B902 - reported to the test below
            out["error"] = e
    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "the call hangs"
    error = out.get("error")
    assert error is None or type(error) is js.InputError, repr(error)
    return error


def test_plan_paths_are_read_with_the_cli_checks(tmp_path):
    # run(path) and _plan_text (export, synthesize) read the plan with open(): a FIFO hung for
    # ever, /dev/zero filled the memory, a directory or a missing file raised IsADirectoryError /
    # FileNotFoundError (run), Latin-1 bytes UnicodeDecodeError, an empty file was read as "no
    # plan" (run fell back to its schedule mode, synthesize to its measured mode), and text after
    # a NUL byte was dropped. Now: the CLI's reader's checks and messages, for the same path.
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    files = {"empty.json": b"", "nul.json": b'{"a":\x00}', "latin.json": b'{\n "a": "\xe9"}',
             "surrogate.json": b'{"a": "\xed\xa0\x80"}'}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(300 << 20)  # sparse: 300 MiB, above the limit of 256 MiB
    paths = [str(fifo), "/dev/zero", str(tmp_path), str(tmp_path / "missing.json"),
             '{"format": "jaxpp-sim-plan"}', "", str(big)] + [str(tmp_path / n) for n in files]
    for path in paths:
        for call, cli_args in (
                (lambda: js.run(path, compute="emulated"), ("run", path, "--compute", "emulated")),
                (lambda: js.synthesize(plan=path), ("synthesize", "--plan", path)),
                (lambda: js.export(path, "megatron"),
                 ("export", "--plan", path, "--format", "megatron", "-o", "-")),
                (lambda: js.export(path, "svg"),
                 ("export", "--plan", path, "--format", "svg", "-o", "-"))):
            error = _finishes(call)
            assert error is not None, (path, cli_args)
            assert str(error) == cli_error(*cli_args), (path, cli_args)
    # A pathlib.Path is a path too.
    error = _finishes(lambda: js.run(fifo, compute="emulated"))
    assert str(error) == f"{fifo}: is not a regular file (a FIFO)"


def test_arguments_that_are_no_path_are_refused():
    # run(0) / run(1) gave the int to open() as a file descriptor, read it and closed it (the
    # process's stdin / stdout); other functions made a file name of str(1) or str(b'...').
    for bad in (0, 2.5, b"/tmp/plan.json", ["plan.json"]):
        for call in (lambda: js.run(bad, compute="emulated"), lambda: js.synthesize(plan=bad)):
            with pytest.raises(js.InputError) as e:
                call()
            assert str(e.value) == f"plan: expected a path, a dict or a SimResult, got {bad!r}"
    os.fstat(0)  # still open
    for call, message in (
            (lambda: js.export(1), "result: expected a SimResult, a RunResult, a trace dict or a "
                                   "plan (a dict or a path), got 1"),
            (lambda: js.export(0, "megatron"), "result: expected a SimResult, a RunResult, a "
                                               "trace dict or a plan (a dict or a path), got 0"),
            (lambda: js.validate(3), "path: expected a path, got 3"),
            (lambda: js.Model.load(1), "name_or_path: expected a preset name or a path, got 1"),
            (lambda: js.Cluster.load(b"h100-sxm"),
             "name_or_path: expected a preset name or a path, got b'h100-sxm'"),
            (lambda: js.simulate(model=7, gpus=8, pp=1, global_batch=8, schedule="1f1b"),
             "model: expected a preset name, a path, a dict or a Model, got 7"),
            (lambda: js.graph(model="gpt3-1.3b", pp=1, cluster=True),
             "cluster: expected a preset name, a path, a dict or a Cluster, got True"),
            (lambda: js.simulate(schedule_file=0, pp=2, microbatches=4, t_f=1, t_b=1),
             "schedule_file: expected a path, got 0"),
            (lambda: js.show(schedule_file=1), "schedule_file: expected a path, got 1"),
            (lambda: js.run(schedule_file=1), "schedule_file: expected a path, got 1"),
            (lambda: js.simulate(schedule="1f1b", pp=2, microbatches=4, stage_times=1),
             "stage_times: expected a path or a dict, got 1"),
            (lambda: js.synthesize(pp=2, microbatches=4, stage_times=b"st.json"),
             "stage_times: expected a path or a dict, got b'st.json'"),
            (lambda: js.simulate(model="gpt3-1.3b", gpus=8, pp=1, global_batch=8,
                                 schedule="1f1b", assign=1),
             "assign: expected a path or a dict, got 1"),
            (lambda: js.validate_model(corpus=1), "corpus: expected a path, got 1"),
            (lambda: js.calibrate(from_trace=1), "from_trace: expected a path, got 1"),
            (lambda: js.validate("plan.json\0x"),
             "path: a file name cannot hold a NUL character, got 'plan.json\\x00x'")):
        with pytest.raises(js.InputError) as e:
            call()
        assert str(e.value) == message
    # A schedule file "" is the CLI's unreadable file name (the core read "" as "not given").
    for call, cli_args in ((lambda: js.show(schedule_file=""), ("show", "--schedule-file", "")),
                           (lambda: js.run(schedule_file=""), ("run", "--schedule-file", ""))):
        with pytest.raises(js.InputError) as e:
            call()
        assert str(e.value) == cli_error(*cli_args)
    # A run takes a SimResult's plan, as export and synthesize do; a Path is a schedule file.
    sim = js.simulate(model="gpt3-13b", cluster="h100-sxm", gpus=32, pp=4, tp=8, global_batch=16,
                      schedule="1f1b", trace=False)
    assert js.run(sim, compute="emulated", time_scale=0.001, steps=1, warmup=0).step_time_s > 0
    import pathlib
    path = pathlib.Path(DATA) / "schedules" / "1f1b_p2_m4.csv"
    assert js.show(schedule_file=path)["ok"]


# Base arguments of each public function, for the checks of its other arguments.
_BASE_ARGS = {
    "graph": ((), dict(model="gpt3-1.3b", pp=1)),
    "simulate": ((), dict(schedule="1f1b", pp=2, microbatches=4, t_f=1, t_b=1)),
    "explore": ((), dict(model="gpt3-1.3b", gpus=8, global_batch=8)),
    "synthesize": ((), dict(pp=2, microbatches=4, t_f=1, t_b=1)),
    "show": ((), dict(schedule="1f1b", pp=2, microbatches=4)),
    "export": (({"events": []},), {}),
    "run": ((), dict(schedule="1f1b", pp=2, microbatches=4)),
    "validate_model": ((), {}),
    "calibrate": ((), {}),
    "jaxpp_stage_times": (({(0, "FWD"): 1.0, (0, "BWD"): 1.0},), {}),
}


def _parameters(predicate):
    """(function name, parameter name) of every keyword parameter of a public function whose
    default satisfies ``predicate``."""
    import inspect
    out = []
    for name in js.__all__:
        f = getattr(js, name)
        if inspect.isfunction(f):
            for p in inspect.signature(f).parameters.values():
                if p.kind == p.KEYWORD_ONLY and predicate(p.default):
                    out.append((name, p.name))
    return out


def _refused(function, **kwargs):
    args, base = _BASE_ARGS[function]
    with pytest.raises(js.InputError) as e:
        getattr(js, function)(*args, **{**base, **kwargs})
    return str(e.value)


def test_boolean_arguments_take_only_true_or_false():
    # bool(value) took any object: zero1='false' turned ZeRO-1 on, check='no' checked.
    booleans = _parameters(lambda d: isinstance(d, bool))
    assert len(booleans) > 25 and ("simulate", "zero1") in booleans
    for function, name in booleans:
        for bad in ("false", "no", 0, None):
            assert _refused(function, **{name: bad}) == \
                f"{name}: expected True or False, got {bad!r}", (function, name)
    import numpy as np  # a NumPy bool is a boolean (the tests of test_commands.py use NumPy too)
    base = dict(schedule="1f1b", pp=2, microbatches=4)
    assert (js.show(**base, fuse_steady_state=np.bool_(False)) ==
            js.show(**base, fuse_steady_state=False))


def test_string_arguments_take_only_strings():
    # str(value) made a name of anything, or pybind raised TypeError (schedule=5).
    strings = [(f, n) for f, n in _parameters(lambda d: isinstance(d, str))
               if n not in ("cluster", "unit")]  # a cluster object or dict; unit's own check
    strings += [("simulate", "schedule"), ("simulate", "a2a_dtype"), ("simulate", "perturb"),
                ("explore", "a2a_dtype"), ("show", "schedule"), ("run", "schedule"),
                ("graph", "schedule"), ("validate_model", "rows_on"), ("calibrate", "name"),
                ("calibrate", "optimizer")]
    assert len(strings) > 25 and ("simulate", "attention") in strings
    for function, name in strings:
        for bad in (5, True, b"1f1b"):
            assert _refused(function, **{name: bad}) == f"{name}: expected a string, got {bad!r}", \
                (function, name)
    assert (_refused("graph", recompute="selective", recompute_modules=["layernorm", 1]) ==
            "recompute_modules: expected a string or a list of strings, got ['layernorm', 1]")


def test_number_arguments_overflow_and_types():
    # t_f=10**400 raised OverflowError (float()); t_f=True was refused but any float() text
    # (" 1", "1_000", "nan") was read; a sample True of jaxpp task times was 1 s.
    measured = ["--schedule", "1f1b", "--pp", "2", "--microbatches", "4", "--t-b", "1"]
    huge = 10 ** 400
    for name, value in (("t_f", huge), ("t_f", "1e400"), ("t_w", huge), ("t_comm", -huge),
                        ("t_a2a_f", huge)):
        flag = "--" + name.replace("_", "-")
        t_f = [] if name == "t_f" else ["--t-f", "1"]
        assert _refused("simulate", **{name: value}) == \
            cli_error("simulate", *measured, *t_f, flag, str(value)), name
    for function, kw, flag in (("synthesize", dict(time_budget_s=huge), "--time-budget-s"),
                               ("run", dict(timeout_s=huge), "--timeout-s"),
                               ("validate_model", dict(band=huge), "--band"),
                               ("graph", dict(max_memory_gib=huge), "--max-memory-gib"),
                               ("explore", dict(robust_jitter=-huge), "--robust-jitter")):
        value = next(iter(kw.values()))
        assert _refused(function, **kw) == (f"{flag}: expected a whole number within the "
                                             f"flag's range, got '{value}'"), function
    for bad in (True, " 1", "1_000", "nan", [1], None):
        assert _refused("simulate", t_w=bad) == f"t_w: expected a number, got {bad!r}"
    assert _refused("jaxpp_stage_times", t_comm_ms=huge) == \
        f"t_comm_ms: expected a number within a float's range, got {huge}"
    with pytest.raises(js.InputError) as e:
        js.jaxpp_stage_times({(0, "FWD"): True, (0, "BWD"): 1.0})
    assert str(e.value) == "jaxpp task times: key (0, 'FWD'): expected a number, got True"
    with pytest.raises(js.InputError) as e:
        js.jaxpp_stage_times([1, 2])
    assert str(e.value) == "jaxpp task times: expected a dict from tasks to times, got [1, 2]"
    # Integers: "+-2" and "²" passed isdigit() and int() raised ValueError; a scalar explore pp
    # beyond a float raised OverflowError, beyond int pybind's TypeError.
    for bad in ("+-2", "²"):
        assert _refused("show", pp=bad) == f"pp: expected an integer, got {bad!r}"
    for bad in (huge, 2 ** 40):
        assert _refused("explore", pp=bad) == \
            f"pp: expected an integer in [-2147483648, 2147483647], got {bad}"
    # A progress callback is callable (pybind raised TypeError).
    assert _refused("explore", progress=5) == \
        "progress: expected a callable progress(done, total), got 5"


# --- JaxPP adapter --------------------------------------------------------------------------------

class _TaskType:
    def __init__(self, name):
        self.name = name


class _Task:
    def __init__(self, stage_id, mubatch_idx, task_type):
        self.stage_id, self.mubatch_idx, self.task_type = stage_id, mubatch_idx, task_type


def test_jaxpp_task_times_adapter():
    fwd, bwd_i, bwd_w = _TaskType("FWD"), _TaskType("BWD_I"), _TaskType("BWD_W")
    times = {}
    for s in range(4):
        for mb in range(8):
            times[_Task(s, mb, fwd)] = 0.001
            times[_Task(s, mb, bwd_i)] = 0.001
            times[(s, mb, bwd_w)] = [0.0009, 0.0011]
    st = js.jaxpp_stage_times(times)
    assert len(st["stages"]) == 4
    assert st["stages"][0]["t_w_ms"] == pytest.approx(1.0)
    a = js.simulate(schedule="ZeroBubble", pp=4, microbatches=8, stage_times=st)
    b = js.simulate(schedule="zb-h1", pp=4, microbatches=8, t_f=1, t_b=1, t_w=1)
    assert a.step_time_s == pytest.approx(b.step_time_s, rel=1e-12)
    full = js.jaxpp_stage_times({(0, "FWD"): 2.0, (0, "BWD"): 4.0}, unit="ms")
    assert full["stages"][0] == {"t_f_ms": 2.0, "t_comm_ms": 0.0, "t_b_ms": 4.0, "t_w_ms": 0.0}
    with pytest.raises(js.InputError):
        js.jaxpp_stage_times({(0, "BWD"): 1.0})
    with pytest.raises(js.InputError):
        js.jaxpp_stage_times({(0, "SEND"): 1.0})


# --- Python conventions, the example --------------------------------------------------------------

def test_help_works():
    text = pydoc.render_doc(js)
    for name in ("simulate", "explore", "show", "validate", "export", "run", "Model", "Cluster"):
        assert name in text
    assert "Measured mode" in pydoc.render_doc(js.simulate)
    with pytest.raises(TypeError):
        js.simulate("zb-h1")  # keyword arguments only


def test_install_into_a_virtual_environment(tmp_path):
    """docs/python.md's steps: a venv, cmake --install --component python, import from it."""
    venv = tmp_path / "venv"
    # --without-pip: the module needs no pip, and ensurepip takes seconds.
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                    str(venv)], check=True, timeout=120)
    subprocess.run(["cmake", "--install", os.environ["JAXPP_BUILD_DIR"], "--component", "python",
                    "--prefix", str(venv)], check=True, capture_output=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([str(venv / "bin" / "python"), "-c",
                        "import jaxpp_sim as js; print(js.__file__); print(js.simulate("
                        "schedule='zb-h1', pp=4, microbatches=8, t_f=1, t_b=1, t_w=1)"
                        ".step_time_s)"],
                       capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=120)
    assert p.returncode == 0, p.stderr
    where, step = p.stdout.split()
    assert where.startswith(str(venv))
    assert float(step) == js.simulate(schedule="zb-h1", pp=4, microbatches=8, t_f=1, t_b=1,
                                      t_w=1).step_time_s


def test_example_script(tmp_path):
    script = os.path.join(SOURCE, "docs", "examples", "explore_and_plot.py")
    env = dict(os.environ, MPLBACKEND="Agg")
    p = subprocess.run([sys.executable, script, "--out", str(tmp_path), "--gpus", "16",
                        "--global-batch", "64"], capture_output=True, text=True, env=env,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    for name in ("pareto.png", "timeline.png", "timeline.svg", "trace.json", "megatron_args.txt"):
        f = tmp_path / name
        assert f.exists() and f.stat().st_size > 0, name
    assert (tmp_path / "pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "--pipeline-model-parallel-size" in (tmp_path / "megatron_args.txt").read_text()

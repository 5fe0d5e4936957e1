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
        r = js.simulate(schedule=name, **{**base, "virtual": 2 if "Interleaved" in name
                                          or name == "KimiK2" else 1})
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


def test_other_argument_checks():
    with pytest.raises(js.InputError) as e:
        small_explore(zero1="maybe")
    assert str(e.value) == cli_error("explore", *EXPLORE_ARGS, "--zero1", "maybe", "--quiet")
    with pytest.raises(js.InputError) as e:
        small_explore(threads=0)
    assert str(e.value) == cli_error("explore", *EXPLORE_ARGS, "--threads", "0", "--quiet")
    with pytest.raises(js.InputError) as e:
        js.simulate(model="gpt3-13b", gpus=8, pp=1, global_batch=8, schedule="1f1b", t_f=1)
    assert str(e.value).startswith("t_f: a measured-mode argument")
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
    # after 0.5 s waiting for tag T from actor P (message lost or peer dead)".
    line = err.strip().splitlines()[-1]
    assert line.startswith("jaxpp-sim run: error: actor ")
    for msg in (line, str(e.value)):
        assert "timed out after 0.5 s waiting for tag" in msg, msg
        assert msg.endswith("(message lost or peer dead)"), msg
    assert str(e.value).startswith("actor ")


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

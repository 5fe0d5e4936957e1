"""jaxpp_sim: the jaxpp-sim toolkit from Python.

Pipeline-parallel training plans: models, clusters, schedules, the discrete-event simulator with
its calibrated cost model, the explorer, exports and the threads runtime. Every function calls
the same C++ library code as the matching ``jaxpp-sim`` command (docs/python.md has the table).

Units: seconds (``*_s``), bytes (``*_bytes``); measured-mode stage times (``t_f``, ``t_b``,
``t_w``, ``t_comm``) are in milliseconds, as on the command line.

Errors: bad input raises :class:`InputError` (a ``ValueError``) with the CLI's one-line message;
a run that starts and fails raises ``RuntimeError``. Simulations, explorations and runs release
the GIL, so other Python threads keep running.

Example::

    import jaxpp_sim as js
    r = js.simulate(schedule="zb-h1", pp=4, microbatches=8, t_f=1, t_b=1, t_w=1)
    r.step_time_s, r.bubble_rate
    best = js.explore(model="gpt3-13b", cluster="h100-sxm", gpus=64, global_batch=512)
    best.to_pandas().head()
"""

import json as _json

from . import _jaxpp_sim as _core
from ._jaxpp_sim import InputError
from ._jaxpp_sim import __version__  # the project's version (jaxpp-sim --version)

__all__ = [
    "InputError", "Model", "Cluster", "SimResult", "ExploreResult", "RunResult",
    "models", "clusters", "schedules", "simulate", "explore", "show", "validate", "export", "run",
    "jaxpp_stage_times",
]

InputError.__doc__ = ("Bad input (a name, a file, a field, an argument): the message is the "
                      "one line jaxpp-sim prints for the same input. A ValueError.")


def _pandas():
    try:
        import pandas
    except ImportError as e:  # pragma: no cover - pandas is a Debian package of the build
        raise ImportError("to_pandas() needs pandas (Debian: python3-pandas)") from e
    return pandas


# --- catalogues -----------------------------------------------------------------------------------

def models():
    """Names of the built-in model presets (``jaxpp-sim graph --model NAME``)."""
    return list(_core.model_presets())


def clusters():
    """Names of the built-in cluster presets (``--cluster NAME``)."""
    return list(_core.cluster_presets())


def schedules():
    """The built-in schedules, as ``jaxpp-sim schedules --json``: a list of dicts with
    ``name``, ``aliases``, ``description`` and ``constraints``."""
    return _json.loads(_core.schedules_json())


# --- models and clusters --------------------------------------------------------------------------

class Model:
    """A model (per-layer work of a transformer). Build one with :meth:`Model.load` or
    :meth:`Model.from_dict`; :meth:`to_dict` gives the model JSON format (docs/graph.md)."""

    def __init__(self, spec):
        self._spec = dict(spec)

    @classmethod
    def load(cls, name_or_path):
        """A preset name (see :func:`models`), a model JSON file or a Hugging Face
        ``config.json`` (as ``--model``)."""
        return cls(_json.loads(_core.load_model(str(name_or_path))))

    @classmethod
    def from_dict(cls, doc, source="model"):
        """A model from a dict in the model JSON format or a Hugging Face config; ``source``
        names it in error messages."""
        return cls(_json.loads(_core.model_from_json(_json.dumps(doc), source)))

    @property
    def name(self):
        return self._spec.get("name", "")

    def shape(self):
        """Totals and shape of the model (parameters, active parameters, ...), as
        ``jaxpp-sim graph --json`` reports them."""
        return _json.loads(_core.model_shape(_json.dumps(self._spec)))

    def to_dict(self):
        return dict(self._spec)

    def __repr__(self):
        return f"Model({self.name!r})"


class Cluster:
    """A cluster (GPU, links, efficiencies). Build one with :meth:`Cluster.load` or
    :meth:`Cluster.from_dict`; :meth:`to_dict` gives the cluster JSON format."""

    def __init__(self, spec):
        self._spec = dict(spec)

    @classmethod
    def load(cls, name_or_path):
        """A preset name (see :func:`clusters`) or a cluster JSON file (as ``--cluster``)."""
        return cls(_json.loads(_core.load_cluster(str(name_or_path))))

    @classmethod
    def from_dict(cls, doc, source="cluster"):
        """A cluster from a dict in the cluster JSON format."""
        return cls(_json.loads(_core.cluster_from_json(_json.dumps(doc), source)))

    @property
    def name(self):
        return self._spec.get("name", "")

    def to_dict(self):
        return dict(self._spec)

    def __repr__(self):
        return f"Cluster({self.name!r})"


def _model(model):
    if isinstance(model, Model):
        return model
    if isinstance(model, dict):
        return Model.from_dict(model)
    return Model.load(model)


def _cluster(cluster):
    if isinstance(cluster, Cluster):
        return cluster
    if isinstance(cluster, dict):
        return Cluster.from_dict(cluster)
    return Cluster.load(cluster)


# --- simulate -------------------------------------------------------------------------------------

class SimResult:
    """One simulated iteration. ``metrics`` is the dict ``jaxpp-sim simulate --json`` prints;
    the common numbers are attributes. ``trace`` is the list of events (dicts with ``actor``,
    ``stream``, ``op``, ``tasks``, ``start_s``, ``end_s``, ...) when the trace was recorded."""

    def __init__(self, metrics, trace=None, plan=None):
        self.metrics = metrics
        self._trace = trace
        self.plan = plan  #: the plan (plan.json format, with ``predicted``), model mode only

    step_time_s = property(lambda self: self.metrics["step_time_s"], doc="seconds per iteration")
    bubble_rate = property(lambda self: self.metrics["bubble_rate"],
                           doc="idle fraction of the worst actor")
    mfu = property(lambda self: self.metrics.get("mfu"),
                   doc="model FLOPs utilisation (model mode; None in measured mode)")
    actors = property(lambda self: self.metrics["actors"],
                      doc="per-actor stats: busy_s, span_s, idle_s, peak_stashed_microbatches")
    breakdown = property(lambda self: self.metrics.get("breakdown"),
                         doc="per-actor time breakdown (simulate(..., breakdown=True)), or None")

    @property
    def trace(self):
        """The simulated events (a list of dicts), or [] when no trace was recorded."""
        if self._trace is None:
            return []
        return self._trace.get("events", [])

    def trace_json(self):
        """The trace in jaxpp-sim's trace format (``simulate --trace``), as a dict."""
        return self._trace

    def to_pandas(self):
        """The per-actor stats as a pandas DataFrame (one row per actor), joined with the
        breakdown when there is one."""
        pd = _pandas()
        df = pd.DataFrame(self.actors)
        if self.breakdown:
            df = df.merge(pd.DataFrame(self.breakdown), on="actor", how="left")
        return df

    def events_to_pandas(self):
        """The trace events as a pandas DataFrame (one row per event)."""
        return _pandas().DataFrame(self.trace)

    def __repr__(self):
        return f"SimResult(step_time_s={self.step_time_s!r}, bubble_rate={self.bubble_rate!r})"


def simulate(*, model=None, cluster="a100-80g", gpus=None, pp=None, tp=1, dp=1, cp=1,
             virtual=1, global_batch=None, microbatch_size=1, schedule=None, schedule_file=None,
             fuse_steady_state=False, recompute="none", sequence_parallel=False, zero1=False,
             overlap_grad_reduce=False, tp_comm_overlap=False, attention="flash",
             partition="auto", breakdown=False, check_memory=True, trace=True,
             microbatches=None, t_f=None, t_b=None, t_w=0.0, t_comm=0.0, stage_times=None):
    """Simulate one training iteration, as ``jaxpp-sim simulate``.

    Model mode (``model`` given): ``model`` (name, path, dict or :class:`Model`), ``cluster``,
    ``gpus``, ``pp``, ``tp``, ``dp``, ``cp``, ``virtual``, ``global_batch``,
    ``microbatch_size``, ``schedule`` or ``schedule_file``, ``recompute``
    (none|selective|full), ``sequence_parallel``, ``zero1``, ``overlap_grad_reduce``,
    ``tp_comm_overlap``, ``attention`` (flash|unfused), ``partition`` ("auto", "even",
    "balanced-time" (least step time within the device memory, docs/partition.md) or
    "0,13,26"), ``breakdown``, ``check_memory``.

    Measured mode (no ``model``): ``schedule`` (any name ``jaxpp-sim schedules`` lists, JaxPP's
    class names such as ``"ZeroBubble"`` or ``"Interleaved1F1B"`` included) or
    ``schedule_file``, ``pp``, ``microbatches``, ``virtual``, and uniform stage times in
    milliseconds ``t_f``, ``t_b`` (input-gradient backward), ``t_w``, ``t_comm``, or
    ``stage_times``: a path to a stage-times JSON file or a dict in that format
    (:func:`jaxpp_stage_times` makes one from JaxPP task times).

    ``trace=False`` skips recording the events (faster). Returns a :class:`SimResult`.
    """
    if model is not None:
        refused = [k for k, v in (("microbatches", microbatches), ("t_f", t_f), ("t_b", t_b),
                                  ("stage_times", stage_times)) if v is not None]
        refused += [k for k, v in (("t_w", t_w), ("t_comm", t_comm)) if v]
        if refused:
            raise InputError(f"{refused[0]}: a measured-mode argument, but model= selects model "
                             "mode (the microbatches are global_batch / (dp x microbatch_size))")
        for name, value in (("gpus", gpus), ("pp", pp), ("global_batch", global_batch)):
            if value is None:
                raise InputError(f"{name}: required in model mode")
        m = _model(model)
        c = _cluster(cluster)
        out = _core.simulate_model(
            _json.dumps(m._spec), _json.dumps(c._spec), int(gpus), int(pp), int(tp),
            int(dp), int(cp), int(virtual), int(global_batch), int(microbatch_size),
            schedule or "", schedule_file or "", bool(fuse_steady_state), str(recompute),
            bool(sequence_parallel), bool(zero1), bool(overlap_grad_reduce),
            bool(tp_comm_overlap), str(attention), str(partition), bool(breakdown),
            bool(check_memory), bool(trace))
        return SimResult(_json.loads(out.metrics), _json.loads(out.trace) if out.trace else None,
                         _json.loads(out.plan))
    if schedule is not None and schedule_file is not None:
        raise InputError("--schedule: give a schedule name or a schedule file, not both")
    stage_file, stage_text = "", ""
    if stage_times is not None:
        if t_f is not None or t_b is not None or t_w or t_comm:
            raise InputError("--stage-times: give per-stage times in a file or uniform times, "
                             "not both")
        if isinstance(stage_times, dict):
            stage_text = _json.dumps(stage_times)
        else:
            stage_file = str(stage_times)
    out = _core.simulate_measured(
        schedule or "", schedule_file or "", pp, microbatches, int(virtual),
        bool(fuse_steady_state), t_f, t_b, float(t_w), float(t_comm), stage_file, stage_text,
        bool(trace))
    return SimResult(_json.loads(out.metrics), _json.loads(out.trace) if out.trace else None)


# --- explore --------------------------------------------------------------------------------------

class ExploreResult:
    """The explorer's result: ``summary`` is the dict ``jaxpp-sim explore --json`` prints.
    ``ranked`` lists the feasible configurations fastest first, ``pareto`` the step-time /
    memory front, ``best`` the first of ``ranked``."""

    def __init__(self, summary, request, explore_s=0.0):
        self.summary = summary
        self._request = request
        #: wall time of the exploration in C++ (enumerate, evaluate, rank), seconds
        self.explore_s = explore_s

    ranked = property(lambda self: [c for c in self.summary["configs"] if "rank" in c],
                      doc="the feasible configurations, fastest first (dicts as explore --json)")
    configs = property(lambda self: self.summary["configs"],
                       doc="every simulated configuration: the ranked ones, then those that "
                           "do not fit")
    pareto = property(lambda self: self.summary["pareto"], doc="the Pareto front")
    best = property(lambda self: self.summary["best"], doc="the fastest feasible configuration")
    top = property(lambda self: self.summary["top"], doc="the top configurations")

    def best_plan(self):
        """The plan (plan.json format, metrics in ``predicted``) of the best configuration, as
        ``explore --plan`` writes it."""
        m, c, gpus, gb, ogr = self._request
        return _json.loads(_core.explore_plan(m, c, gpus, gb, _json.dumps(self.best["config"]),
                                              ogr))

    def to_pandas(self):
        """Ranked configurations as a DataFrame: one row per configuration, the config fields
        flattened next to the metrics."""
        pd = _pandas()
        rows = []
        for i, r in enumerate(self.ranked):
            row = {k: v for k, v in r.items() if k != "config"}
            row.update(r.get("config", {}))
            rows.append(row)
        return pd.DataFrame(rows)

    def __len__(self):
        return len(self.ranked)

    def __repr__(self):
        return f"ExploreResult({len(self)} ranked configurations)"


def explore(*, model, cluster="a100-80g", gpus, global_batch, max_memory_gib=None,
            schedules=None, pp=None, tp=None, cp=None, microbatch_sizes=None, virtual=None,
            recompute=None, zero1="both", sequence_parallel=False, attention="flash",
            tp_comm_overlap=False, overlap_grad_reduce=False, threads=None, top=10,
            explain=False, progress=None):
    """Search the parallel configurations of ``model`` on ``gpus`` GPUs of ``cluster``, as
    ``jaxpp-sim explore``. The list arguments (``schedules``, ``pp``, ``tp``, ``cp``,
    ``microbatch_sizes``, ``virtual``, ``recompute``) restrict the space; None is the default
    domain (docs/explore.md). ``zero1`` is "off", "on" or "both". ``progress(done, total)`` is
    called after each unit of work (from a worker thread, holding the GIL). Raises
    :class:`InputError` when nothing fits (the CLI's message). Returns an
    :class:`ExploreResult`."""
    m = _json.dumps(_model(model)._spec)
    c = _json.dumps(_cluster(cluster)._spec)
    if threads is not None and int(threads) < 1:
        raise InputError(f"--threads: must be >= 1, got {threads}")
    text, explore_s = _core.explore(
        m, c, int(gpus), int(global_batch), float(max_memory_gib or 0), list(schedules or []),
        list(pp or []), list(tp or []), list(cp or []), list(microbatch_sizes or []),
        list(virtual or []), list(recompute or []), str(zero1), bool(sequence_parallel),
        str(attention), bool(tp_comm_overlap), bool(overlap_grad_reduce), int(threads or 0),
        int(top), bool(explain), progress)
    return ExploreResult(_json.loads(text), (m, c, int(gpus), int(global_batch),
                                             bool(overlap_grad_reduce)), explore_s)


# --- show, validate, export -----------------------------------------------------------------------

def show(*, schedule=None, schedule_file=None, pp=None, microbatches=None, stages=0,
         fuse_steady_state=False, group_size=0):
    """A schedule's per-actor order and unit-cost timeline, as ``jaxpp-sim show --json``, plus
    ``text`` (the order), ``timeline_text`` (the unit-cost Gantt chart), ``json_text`` and
    ``csv_text`` (the schedule as a custom schedule file, ``show --export-json/--export-csv``).
    ``ok`` and ``errors`` say whether the schedule is valid."""
    return _json.loads(_core.show(schedule or "", schedule_file or "", int(pp or 0),
                                  int(microbatches or 0), int(stages), bool(fuse_steady_state),
                                  int(group_size)))


def validate(path):
    """Check a custom schedule file (JSON or PyTorch CSV) or a plan file, as
    ``jaxpp-sim validate --json``: a dict with ``ok`` and ``errors``."""
    return _json.loads(_core.validate(str(path)))


_EXPORT_FORMATS = ("perfetto", "chrome", "svg", "png", "dot", "text", "json")


def export(result, format="perfetto", *, width=0, per_stream=False, title=""):
    """A simulated (or run) timeline in ``format``: "perfetto" / "chrome" (JSON text for
    ui.perfetto.dev), "svg", "dot", "text" (Gantt chart), "json" (the trace) as a string,
    "png" as bytes (as ``jaxpp-sim export``). ``result`` is a :class:`SimResult`, a
    :class:`RunResult` or a trace dict."""
    if isinstance(result, (SimResult, RunResult)):
        trace = result.trace_json()
    else:
        trace = result
    if not trace:
        raise InputError("export: the result has no trace (simulate with trace=True)")
    return _core.export_trace(_json.dumps(trace), str(format), int(width), bool(per_stream),
                              str(title))


# --- run ------------------------------------------------------------------------------------------

class RunResult:
    """A run on the threads backend: ``report`` is the dict (losses, step_times_s, step_time_s,
    check results); ``trace`` the measured events."""

    def __init__(self, report):
        self._trace = report.pop("trace", None)
        self.report = report

    step_time_s = property(lambda self: self.report["step_time_s"],
                           doc="median measured step time")
    losses = property(lambda self: self.report["losses"], doc="loss per measured step")
    check_passed = property(lambda self: self.report["check_passed"],
                            doc="False when check=True found a difference")

    @property
    def trace(self):
        return [] if self._trace is None else self._trace.get("events", [])

    def trace_json(self):
        return self._trace

    def __repr__(self):
        return f"RunResult(step_time_s={self.step_time_s!r})"


def run(plan=None, *, schedule=None, schedule_file=None, pp=None, microbatches=None, virtual=1,
        fuse_steady_state=False, compute="real", time_scale=1.0, steps=3, warmup=1, dp=1,
        timeout_s=30.0, check=False, hidden=32, seq=8, layers_per_stage=2, optimizer="sgd",
        seed=1234, inject_drop=-1):
    """Execute a program on the threads backend, as ``jaxpp-sim run``: a plan (a dict in the
    plan.json format, e.g. ``ExploreResult.best_plan()`` or ``SimResult.plan``, or a path) or a
    schedule (``schedule``, ``pp``, ``microbatches``, ``virtual``) on the MLP workload.
    ``compute`` is "real" (fp64 numerics; ``check=True`` compares with the independent
    reference) or "emulated" (each task sleeps its predicted duration times ``time_scale``).
    ``inject_drop=TAG`` loses that message (``--inject-drop``: the receiver times out after
    ``timeout_s``). Raises ``RuntimeError`` when the run fails (timeout, dead peer), with the
    message the CLI prints."""
    plan_text = ""
    if plan is not None:
        if isinstance(plan, dict):
            plan_text = _json.dumps(plan)
        else:
            with open(plan, encoding="utf-8") as f:
                plan_text = f.read()
    text = _core.run(schedule or "", schedule_file or "", int(pp or 0), int(microbatches or 0),
                     int(virtual), bool(fuse_steady_state), plan_text, str(compute),
                     float(time_scale), int(steps), int(warmup), int(dp), float(timeout_s),
                     bool(check), int(hidden), int(seq), int(layers_per_stage), str(optimizer),
                     int(seed), int(inject_drop))
    return RunResult(_json.loads(text))


# --- JaxPP adapter --------------------------------------------------------------------------------

_JAXPP_KINDS = {"FWD": "t_f_ms", "BWD": "t_bfull_ms", "BWD_I": "t_b_ms", "BWD_W": "t_w_ms"}


def _task_key(key):
    """(stage_id, kind name) of a JaxPP task key: a ``jaxpp.types.Task``-like object
    (``stage_id``, ``task_type``), a tuple ``(stage_id, mubatch_idx, task_type)`` or
    ``(stage_id, task_type)``, where task_type is a ``TaskType`` enum member or its name."""
    if hasattr(key, "stage_id") and hasattr(key, "task_type"):
        stage, kind = key.stage_id, key.task_type
    elif isinstance(key, tuple) and len(key) in (2, 3):
        stage, kind = key[0], key[-1]
    else:
        raise InputError(f"jaxpp task times: key {key!r}: expected a Task or a tuple "
                         "(stage_id, mubatch_idx, task_type)")
    name = getattr(kind, "name", kind)
    if not isinstance(name, str) or name.upper() not in _JAXPP_KINDS:
        raise InputError(f"jaxpp task times: key {key!r}: unknown task type {kind!r} "
                         "(expected FWD, BWD, BWD_I or BWD_W)")
    return int(stage), name.upper()


def jaxpp_stage_times(task_times, *, unit="s", t_comm_ms=0.0):
    """A stage-times dict for ``simulate(stage_times=...)`` from JaxPP task times.

    Assumed shape (docs/python.md): a mapping from a task to its measured time, where a task is
    a ``jaxpp.types.Task`` (``stage_id``, ``mubatch_idx``, ``task_type``) or the tuple
    ``(stage_id, mubatch_idx, task_type)`` / ``(stage_id, task_type)``, ``task_type`` a
    ``TaskType`` member or its name (FWD, BWD, BWD_I, BWD_W); a value is a number or a list of
    samples (averaged). ``unit`` is "s" or "ms". Per stage: T_F = mean FWD; with split backward
    T_B = mean BWD_I and T_W = mean BWD_W; with a full backward T_B = mean BWD and T_W = 0
    (the simulator prices B = T_B + T_W). Every stage 0..S-1 needs FWD and a backward."""
    if unit not in ("s", "ms"):
        raise InputError(f"jaxpp task times: unit: expected 's' or 'ms', got {unit!r}")
    scale = 1e3 if unit == "s" else 1.0
    sums = {}
    for key, value in dict(task_times).items():
        stage, kind = _task_key(key)
        samples = list(value) if isinstance(value, (list, tuple)) else [value]
        if not samples:
            raise InputError(f"jaxpp task times: key {key!r}: no samples")
        acc = sums.setdefault((stage, kind), [0.0, 0])
        acc[0] += sum(float(v) for v in samples) * scale
        acc[1] += len(samples)
    if not sums:
        raise InputError("jaxpp task times: empty")
    num_stages = max(s for s, _ in sums) + 1
    stages = []
    for s in range(num_stages):
        mean = {k: v[0] / v[1] for (st, k), v in sums.items() if st == s}
        if "FWD" not in mean:
            raise InputError(f"jaxpp task times: stage {s}: no FWD time")
        entry = {"t_f_ms": mean["FWD"], "t_comm_ms": float(t_comm_ms)}
        if "BWD_I" in mean:
            entry["t_b_ms"] = mean["BWD_I"]
            entry["t_w_ms"] = mean.get("BWD_W", 0.0)
        elif "BWD" in mean:
            entry["t_b_ms"] = mean["BWD"]
            entry["t_w_ms"] = 0.0
        else:
            raise InputError(f"jaxpp task times: stage {s}: no BWD or BWD_I time")
        stages.append(entry)
    return {"stages": stages}

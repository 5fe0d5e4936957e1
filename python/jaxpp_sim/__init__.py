"""jaxpp_sim: the jaxpp-sim toolkit from Python.

Pipeline-parallel training plans: models, clusters, schedules, the discrete-event simulator with
its calibrated cost model, the explorer, exports and the threads runtime. Every function calls
the same C++ library code as the matching ``jaxpp-sim`` command (docs/python.md has the table).

Units: seconds (``*_s``), bytes (``*_bytes``); measured-mode stage times (``t_f``, ``t_b``,
``t_w``, ``t_comm``) are in milliseconds, as on the command line.

Errors: bad input raises :class:`InputError` (a ``ValueError``) with the CLI's one-line message;
so does an argument of the wrong type, naming it (a boolean takes True or False, a name a str, a
number an int, a float or its decimal text, a file a str or a path-like object: docs/python.md);
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
import math as _math
import numbers as _numbers
import os as _os
import re as _re

from . import _jaxpp_sim as _core
from ._jaxpp_sim import InputError
from ._jaxpp_sim import __version__  # the project's version (jaxpp-sim --version)


def _int(name, value, bits=32, signed=True):
    """``value`` as an int for the argument ``name``: an integer, an integral float (4.0) or its
    decimal text, within the core's integer type (``bits``, ``signed``: int by default).
    InputError naming the argument otherwise (int() truncated 2.5 to 2 in silence; a list, or an
    integer beyond the core's type, reached pybind, whose error named its internal function and
    not the argument)."""
    v = None
    if not isinstance(value, bool):
        if isinstance(value, _numbers.Integral):
            v = int(value)
        elif isinstance(value, _numbers.Real):
            try:
                integral = float(value).is_integer()
            except OverflowError:  # beyond a float (Fraction(10**400)): the range check below
                integral = int(value) == value
            if integral:
                v = int(value)
        elif isinstance(value, str) and _re.fullmatch(r"\s*[+-]?[0-9]+\s*", value):
            # ASCII digits and one sign ("+-2" and "²" passed isdigit() and int() raised)
            v = int(value)
    if v is None:
        raise InputError(f"{name}: expected an integer, got {value!r}")
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if not lo <= v <= hi:
        raise InputError(f"{name}: expected an integer in [{lo}, {hi}], got {v}")
    return v


def _opt_int(name, value, bits=32, signed=True):
    return None if value is None else _int(name, value, bits, signed)


# A number's text as the CLI's decimal flags take it (is_decimal_number, graph/range_check.h):
# float() also read "1_000", " 1 ", "nan" and "infinity".
_DECIMAL = r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?"


def _float(name, value, flag=None):
    """``value`` as a float for the argument ``name``: an int, a float (not a bool) or the CLI's
    decimal text of a number ("1.5", "2e-3"); InputError naming the argument otherwise. A number
    beyond a float's range (10**400: OverflowError; "1e400") is refused with the CLI's message for
    its text on ``flag`` (default ``--name``), as ``--t-f 1e400`` is; ``flag=""`` for an argument
    without a flag. Ranges, NaN and infinities are the core's checks."""
    if isinstance(value, str):
        if not _re.fullmatch(_DECIMAL, value):
            raise InputError(f"{name}: expected a number, got {value!r}")
        v, text = float(value), value
        if _math.isfinite(v):
            return v
    elif isinstance(value, _numbers.Real) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            text = str(value)
    else:
        raise InputError(f"{name}: expected a number, got {value!r}")
    if flag == "":
        raise InputError(f"{name}: expected a number within a float's range, got {text}")
    _core.unreadable_number(flag or "--" + name.replace("_", "-"), text)
    raise AssertionError("unreachable: the core raises for an unreadable number")


def _opt_float(name, value):
    return None if value is None else _float(name, value)


def _cli_float(flag, name, value):
    """``value`` as a float for a flag whose CLI parser refuses NaN and infinities before any
    range check (``--timeout-s nan``: "expected a number, got 'nan'"), with the CLI's message
    for the text the user gave ("1e400" overflows, "NaN" is not a number)."""
    if isinstance(value, str) and not _re.fullmatch(_DECIMAL, value):
        _core.unreadable_number(flag, value)
    v = _float(name, value, flag)
    if _math.isfinite(v):
        return v
    _core.unreadable_number(flag, repr(v))
    raise AssertionError("unreachable: the core raises for a non-finite number")


def _bool(name, value):
    """``value`` for a boolean argument: True or False (a NumPy bool too). Anything else is
    refused: bool('false') is True, so zero1='false' turned ZeRO-1 on."""
    if isinstance(value, bool):
        return value
    if type(value).__module__ == "numpy" and type(value).__name__ in ("bool_", "bool"):
        return bool(value)
    raise InputError(f"{name}: expected True or False, got {value!r}")


def _str(name, value):
    """``value`` for a string argument (a name, a mode, a spec): a str only; str() made a name of
    anything (schedule=5 reached pybind, whose TypeError named no argument)."""
    if isinstance(value, str):
        return value
    raise InputError(f"{name}: expected a string, got {value!r}")


def _opt_str(name, value):
    """A string argument whose None means "not given" (the core's "")."""
    return "" if value is None else _str(name, value)


def _path(name, value, expected="a path"):
    """``value`` for a file argument: a str or an ``os.PathLike`` giving one. An int was a file
    descriptor to open() (run(1) read, and closed, the process's stdout) or became the file "1";
    bytes became "b'...'". ``expected`` words the refusal (``plan: expected a path, a dict or a
    SimResult, got 1``). A NUL character is refused: the core's C strings stopped at it and read
    another file."""
    text = _os.fspath(value) if isinstance(value, _os.PathLike) else value
    if not isinstance(text, str):
        raise InputError(f"{name}: expected {expected}, got {value!r}")
    if "\0" in text:
        raise InputError(f"{name}: a file name cannot hold a NUL character, got {text!r}")
    return text


def _opt_path(name, value, expected="a path"):
    """A file argument whose None means "not given" (the core's "")."""
    return "" if value is None else _path(name, value, expected)


def _read_input_text(path):
    """The text of an input file, read by the core's reader (read_input_text,
    graph/input_file.h) with its checks and messages, for the files the module reads itself (a
    plan's path): a regular file (a FIFO blocked open() for ever, /dev/zero filled the memory, a
    directory gave IsADirectoryError), at most 256 MiB, no NUL byte, UTF-8. The GIL is released
    while it reads."""
    return _core.read_input_text(path)


# A file name "" (``--corpus ''``, ``--assign ''``): the core's message for it. The core reads ""
# as "not given", so the module refuses it itself.
_EMPTY_PATH = '"" (an empty file name): cannot read file: No such file or directory'


def _split_list(text):
    """The items of a comma-separated list as the CLI splits them (std::getline: "" has none, and
    no empty item follows a final comma)."""
    items = text.split(",")
    if items[-1] == "":
        items.pop()
    return items


def _int_list(name, value):
    """An explore list argument of integers (``pp``, ``tp``, ...): None is the default domain
    ([]); a list or tuple (items as :func:`_int`); one integer; or a comma-separated string,
    parsed as the CLI's flag (``"2,4"``). Empty: the CLI's message for ``--flag ''``."""
    flag = "--" + name.replace("_", "-")
    if value is None:
        return []
    if isinstance(value, str):
        out = []
        for item in _split_list(value):
            # std::stoi: leading blanks and a sign, then digits to the end; positive, an int
            if not _re.fullmatch(r"\s*[+-]?[0-9]+", item) or not 1 <= int(item) < 2**31:
                raise InputError(f"{flag}: expected a comma-separated list of positive integers,"
                                 f" got '{value}'")
            out.append(int(item))
        items = out
    elif isinstance(value, (list, tuple)):
        items = [_int(name, v) for v in value]
    elif isinstance(value, _numbers.Real) and not isinstance(value, bool):
        try:
            integral = isinstance(value, _numbers.Integral) or float(value).is_integer()
        except OverflowError:  # float(10**400)
            integral = int(value) == value
        if not integral:
            raise InputError(f"{name}: expected an integer or a list of integers, got {value!r}")
        items = [_int(name, value)]  # the core's int: 2**40 reached pybind's TypeError
    else:
        raise InputError(f"{name}: expected an integer or a list of integers, got {value!r}")
    if not items:
        raise InputError(f"{flag}: expected at least one value")
    return items


def _str_list(name, value, empty, numbers=False):
    """An explore list argument of names (``schedules``, ``recompute``; ``numbers``: items may be
    integers too, ``offload_layers``): None is the default domain ([]); a list or tuple; one
    item; or a comma-separated string as the CLI's flag (``"1f1b,zb-h1"``). Empty: the CLI's
    message ``empty`` for ``--flag ''``."""
    def item_ok(v):
        return isinstance(v, str) or (numbers and isinstance(v, _numbers.Integral)
                                      and not isinstance(v, bool))
    if value is None:
        return []
    if isinstance(value, str):
        items = _split_list(value)
    elif isinstance(value, (list, tuple)) and all(item_ok(v) for v in value):
        items = [str(v) for v in value]
    elif item_ok(value):
        items = [str(value)]
    else:
        what = ("an integer, a string or a list of them" if numbers
                else "a string or a list of strings")
        raise InputError(f"{name}: expected {what}, got {value!r}")
    if not items:
        raise InputError(f"--{name.replace('_', '-')}: {empty}")
    return items


def _opt_cli_float(flag, name, value):
    return None if value is None else _cli_float(flag, name, value)


def _nonfinite_path(value):
    """(where, value) of the first NaN or infinity inside ``value`` (dicts, lists, tuples), the
    core's way of naming fields ("layers_list[2]: field 'fwd_flops'"); None when there is none."""
    if isinstance(value, float):
        return ([], value) if not _math.isfinite(value) else None
    items = []
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, (list, tuple)):
                items += [(f"{k}[{i}]", x) for i, x in enumerate(v)]
            else:
                items.append((f"field '{k}'", v))
    elif isinstance(value, (list, tuple)):
        items = [(f"[{i}]", x) for i, x in enumerate(value)]
    for name, x in items:
        found = _nonfinite_path(x)
        if found:
            return [name] + found[0], found[1]
    return None


def _dumps(value, what):
    """JSON text of a dict or list the user gave, ``what`` naming it in errors. JSON has no NaN or
    infinity: one is refused naming where it is (json.dumps wrote NaN, and the core's parser
    reported a position in text the user never wrote); a value JSON cannot hold (a set, an object)
    is refused naming ``what``."""
    try:
        return _json.dumps(value, allow_nan=False)
    except ValueError:
        found = _nonfinite_path(value)
        where = ": ".join([what] + (found[0] if found else []))
        got = found[1] if found else "NaN or infinity"
        raise InputError(f"{where}: expected a finite number, got {got} (JSON has no NaN or "
                         "infinity)") from None
    except TypeError as e:
        raise InputError(f"{what}: {e}") from None

__all__ = [
    "InputError", "Model", "Cluster", "SimResult", "ExploreResult", "RunResult",
    "SynthesisResult", "CalibrationResult",
    "models", "clusters", "schedules", "graph", "simulate", "explore", "synthesize", "show",
    "validate", "validate_model", "export", "run", "calibrate", "jaxpp_stage_times",
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

def _source(source):
    if not isinstance(source, str):
        raise InputError(f"source: expected a string, got {source!r}")
    return source


def _spec_of(cls, spec, kind):
    """The checked spec of ``Model(spec)`` / ``Cluster(spec)``: a dict only (a name or a path
    goes to ``load``), read as ``from_dict`` reads it."""
    if not isinstance(spec, dict):
        raise InputError(f"{cls.__name__}({spec!r}): expected a dict in the {kind} JSON format; "
                         f"use {cls.__name__}.load(name_or_path) for a preset or a file, "
                         f"{cls.__name__}.from_dict(doc) for a dict")
    return cls.from_dict(spec)._spec


class Model:
    """A model (per-layer work of a transformer). Build one with :meth:`Model.load` or
    :meth:`Model.from_dict` (``Model(doc)`` with a dict is ``Model.from_dict(doc)``);
    :meth:`to_dict` gives the model JSON format (docs/graph.md)."""

    def __init__(self, spec):
        self._spec = _spec_of(Model, spec, "model")

    @classmethod
    def _of(cls, spec):
        """A model of the core's JSON (already checked)."""
        self = cls.__new__(cls)
        self._spec = dict(spec)
        return self

    @classmethod
    def load(cls, name_or_path):
        """A preset name (see :func:`models`), a model JSON file or a Hugging Face
        ``config.json`` (as ``--model``)."""
        return cls._of(_json.loads(_core.load_model(
            _path("name_or_path", name_or_path, "a preset name or a path"))))

    @classmethod
    def from_dict(cls, doc, source="model"):
        """A model from a dict in the model JSON format or a Hugging Face config; ``source`` (a
        string) names it in error messages."""
        source = _source(source)
        return cls._of(_json.loads(_core.model_from_json(_dumps(doc, source), source)))

    @property
    def name(self):
        return self._spec.get("name", "")

    def shape(self):
        """Shape of the model (hidden, heads, layers, ...) and its totals ``params``,
        ``active_params`` and ``mtp_params``, as ``jaxpp-sim graph --json`` reports them."""
        return _json.loads(_core.model_shape(_json.dumps(self._spec)))

    def to_dict(self):
        return dict(self._spec)

    def __repr__(self):
        return f"Model({self.name!r})"


class Cluster:
    """A cluster (GPU, links, efficiencies). Build one with :meth:`Cluster.load` or
    :meth:`Cluster.from_dict` (``Cluster(doc)`` with a dict is ``Cluster.from_dict(doc)``);
    :meth:`to_dict` gives the cluster JSON format."""

    def __init__(self, spec):
        self._spec = _spec_of(Cluster, spec, "cluster")

    @classmethod
    def _of(cls, spec):
        """A cluster of the core's JSON (already checked)."""
        self = cls.__new__(cls)
        self._spec = dict(spec)
        return self

    @classmethod
    def load(cls, name_or_path):
        """A preset name (see :func:`clusters`) or a cluster JSON file (as ``--cluster``)."""
        return cls._of(_json.loads(_core.load_cluster(
            _path("name_or_path", name_or_path, "a preset name or a path"))))

    @classmethod
    def from_dict(cls, doc, source="cluster"):
        """A cluster from a dict in the cluster JSON format; ``source`` (a string) names it in
        error messages."""
        source = _source(source)
        return cls._of(_json.loads(_core.cluster_from_json(_dumps(doc, source), source)))

    @property
    def name(self):
        return self._spec.get("name", "")

    def to_dict(self):
        return dict(self._spec)

    def __repr__(self):
        return f"Cluster({self.name!r})"


def _model(model, name="model"):
    if isinstance(model, Model):
        return model
    if isinstance(model, dict):
        return Model.from_dict(model)
    return Model.load(_path(name, model, "a preset name, a path, a dict or a Model"))


def _cluster(cluster, name="cluster"):
    if isinstance(cluster, Cluster):
        return cluster
    if isinstance(cluster, dict):
        return Cluster.from_dict(cluster)
    return Cluster.load(_path(name, cluster, "a preset name, a path, a dict or a Cluster"))


_PLAN_TYPES = "a path, a dict or a SimResult"


def _plan_text(plan, name="plan"):
    """(JSON text, source name) of a plan given as a dict, a path or a result holding a plan.
    A path is read as the CLI reads ``--plan FILE`` (the core's checks and messages, see
    :func:`_read_input_text`); anything else (an int was a file descriptor to open()) is refused
    naming the argument ``name``."""
    if isinstance(plan, SimResult):
        if plan.plan is None:
            raise InputError(f"{name}: the result holds no plan (model-mode simulate without "
                             "perturb gives one)")
        plan = plan.plan
    if isinstance(plan, dict):
        return _dumps(plan, "plan"), "plan"
    path = _path(name, plan, _PLAN_TYPES)
    text = _read_input_text(path)
    if not text:
        # The core reads "" as "no plan" (run fell back to its schedule mode, synthesize to its
        # measured mode): its parser's message for an empty file instead, as the CLI's.
        _core.model_from_json(text, path)
        raise AssertionError("unreachable: the core's parser refuses empty text")
    return text, path


def _assign_args(assign):
    """(path, JSON text) of an ``assign`` argument: a path to an assignment file or plan.json, or
    a dict (``{"assignment": {...}}`` or the entries themselves, e.g.
    ``{"embedding": 0, "layer{i}": "i mod 4", "logits": 3}``)."""
    if assign is None:
        return "", ""
    if isinstance(assign, dict):
        return "", _dumps(assign, "assign")
    path = _path("assign", assign, "a path or a dict")
    if path == "":  # the core reads "" as "no assignment"
        raise InputError(_EMPTY_PATH)
    return path, ""


def _refuse_given(args, why):
    """InputError for the first argument in ``args`` (name, value, default) not at its default:
    the CLI refuses the flag of the other mode, with the flag's name."""
    for name, value, default in args:
        if value != default:
            raise InputError(f"--{name.replace('_', '-')}: {why}")


# --- graph ----------------------------------------------------------------------------------------

def graph(*, model, pp, virtual=1, microbatches=8, microbatch_size=1, partition="auto",
          first_stage_fewer=None, last_stage_fewer=None, placement="", split_backward=False,
          recompute="none", dot=False, schedule=None, cluster=None, tp=None, dp=None, cp=None,
          sequence_parallel=False, zero1=False, max_memory_gib=None, shard_grads=False,
          shard_params=False, recompute_layers=None, offload_layers=0, recompute_modules=None):
    """A model's pipeline stages and task graph, as ``jaxpp-sim graph --json``: the model's
    totals, the partition into ``pp x virtual`` stages (``partition`` "auto" or the first layer
    of each stage, e.g. "0,12,24"; ``first_stage_fewer``/``last_stage_fewer`` shape the auto
    partition), the placement ("linear", "loop" or "v"; default linear, loop when
    ``virtual > 1``), per-stage work and the task counts of one iteration with ``microbatches``
    microbatches (``split_backward`` splits every backward into I and W). ``dot=True`` adds the
    task graph as Graphviz DOT text under ``"dot"`` (``graph --dot FILE``).

    ``recompute`` (none|selective|full|op), ``recompute_layers`` (``--recompute-layers``: with
    full, only the first N transformer layers of each stage recomputed), ``recompute_modules``
    (``--recompute-modules``: with selective, Megatron-Core's recompute modules, a list or a
    comma-separated string: core_attn, layernorm, mla_up_proj, moe_act) and ``offload_layers``
    (``--offload-layers``: the first N transformer layers' activations in host memory; pp 1,
    recompute none) change each stage's ``stash_bytes`` and ``recompute_flops`` as in
    :func:`simulate`, with its rules and messages.

    ``partition="even"`` is Megatron-LM's split; ``partition="balanced-time"`` is the partition
    ``simulate`` searches (docs/partition.md) for ``schedule`` (required) on ``cluster``
    (default "a100-80g") with ``tp``, ``dp``, ``cp``, ``sequence_parallel``, ``zero1``,
    ``shard_grads``, ``shard_params`` and ``max_memory_gib`` as in ``simulate`` (gpus = pp·tp·dp·cp, global batch = microbatches ·
    microbatch_size · dp), as ``graph --partition balanced-time``. Returns a dict."""
    m = _model(model)
    partition = _str("partition", partition)
    balanced = partition == "balanced-time"
    cluster_text = ""
    if cluster is not None or balanced:
        cluster_text = _json.dumps(_cluster("a100-80g" if cluster is None else cluster)._spec)
    text, dot_text = _core.graph(
        _json.dumps(m._spec), _int("pp", pp), _int("virtual", virtual),
        _int("microbatches", microbatches), _int("microbatch_size", microbatch_size),
        partition, _opt_int("first_stage_fewer", first_stage_fewer),
        _opt_int("last_stage_fewer", last_stage_fewer), _opt_str("placement", placement),
        _bool("split_backward", split_backward), _str("recompute", recompute),
        _bool("dot", dot), _opt_str("schedule", schedule), cluster_text,
        _opt_int("tp", tp), _opt_int("dp", dp), _opt_int("cp", cp),
        _bool("sequence_parallel", sequence_parallel), _bool("zero1", zero1),
        _opt_float("max_memory_gib", max_memory_gib), _bool("shard_grads", shard_grads),
        _bool("shard_params", shard_params), _opt_int("recompute_layers", recompute_layers),
        _int("offload_layers", offload_layers), _recompute_modules_arg(recompute_modules))
    out = _json.loads(text)
    if dot:  # a bool: checked above
        out["dot"] = dot_text
    return out


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


def _recompute_modules_arg(modules):
    """``recompute_modules`` as ``--recompute-modules``'s text ("" = not given, None). An empty
    list or string names no module: passed as ",", which the core refuses with the CLI's message
    for ``--recompute-modules ''`` (its "" would mean "not given")."""
    if modules is None:
        return ""
    if isinstance(modules, str):
        text = modules
    elif isinstance(modules, (list, tuple)) and all(isinstance(m, str) for m in modules):
        text = ",".join(modules)
    else:
        raise InputError(f"recompute_modules: expected a string or a list of strings, "
                         f"got {modules!r}")
    return text or ","


def _perturb_arg(perturb, breakdown=False):
    """``perturb`` as ``--perturb``'s text ("" = not given, None); "" is refused as the CLI
    refuses ``--perturb ''`` (the breakdown check first, as the core's order)."""
    if perturb is None:
        return ""
    text = _str("perturb", perturb)
    if text == "":
        if breakdown:
            raise InputError("--perturb and --breakdown: the breakdown prices the unperturbed "
                             "cost model; run them separately")
        raise InputError("--perturb: empty perturbation")
    return text


def simulate(*, model=None, cluster="a100-80g", gpus=None, pp=None, tp=1, dp=1, cp=1,
             virtual=None, global_batch=None, microbatch_size=1, schedule=None, schedule_file=None,
             fuse_steady_state=False, recompute="none", sequence_parallel=False, zero1=False,
             overlap_grad_reduce=False, tp_comm_overlap=False, attention="flash",
             partition="auto", max_memory_gib=None, ep=1, etp=None, moe_imbalance=1.0,
             moe_overlap="auto", breakdown=False, check_memory=True, trace=True, perturb=None,
             assign=None, microbatches=None, t_f=None, t_b=None, t_w=0.0, t_comm=0.0, t_a2a_f=0.0,
             t_a2a_b=0.0, stage_times=None, grad_dtype="cluster", a2a_dtype=None,
             shard_grads=False, shard_params=False, optimizer_state="cluster",
             moe_dispatcher="alltoall", moe_routing="random", recompute_layers=None,
             offload_layers=0, recompute_modules=None, moe_node_limit=0, moe_device_limit=0):
    """Simulate one training iteration, as ``jaxpp-sim simulate``.

    Model mode (``model`` given): ``model`` (name, path, dict or :class:`Model`), ``cluster``,
    ``gpus``, ``pp``, ``tp``, ``dp``, ``cp``, ``virtual``, ``global_batch``,
    ``microbatch_size``, ``schedule`` or ``schedule_file``, ``recompute``
    (none|selective|full|op), ``recompute_layers`` (``--recompute-layers``: with full, only the
    first N transformer layers of each stage chunk recomputed), ``recompute_modules``
    (``--recompute-modules``: with selective, Megatron-Core's modules as a list or a
    comma-separated string: core_attn, layernorm, mla_up_proj, moe_act), ``offload_layers``
    (``--offload-layers``: activation offloading of the first N transformer layers; pp 1,
    recompute none), ``sequence_parallel``, ``zero1``, ``shard_grads`` (gradient
    sharding, ZeRO-2, needs ``zero1``; ``--shard-grads``), ``shard_params`` (parameter
    sharding, ZeRO-3 / FSDP, needs ``zero1``, implies ``shard_grads``; ``--shard-params``),
    ``overlap_grad_reduce``,
    ``tp_comm_overlap``, ``attention`` (flash|flash2|unfused), ``partition`` ("auto", "even",
    "balanced-time" (least step time within the device memory, docs/partition.md) or
    "0,13,26"), ``max_memory_gib`` (memory limit per GPU in GiB of the balanced-time search
    and of the fit check; default the cluster's HBM; ``--max-memory-gib``; with
    balanced-time ``metrics["stage_begin"]`` holds the searched stage starts),
    ``breakdown``, ``check_memory``; MoE models: ``ep`` (expert parallelism),
    ``etp`` (expert tensor parallelism, default tp), ``moe_imbalance`` (tokens of the busiest
    expert rank over the balanced share, >= 1), ``moe_overlap`` (auto|dualpipe|1f1b|none),
    ``a2a_dtype`` (``--a2a-dtype``: "fp8" or "fp8,bf16" for dispatch and combine),
    ``moe_dispatcher`` (``--moe-dispatcher``: alltoall|deepep, a token copy per routed expert or
    per destination rank and node), ``moe_routing`` (``--moe-routing``: random|contiguous),
    ``moe_node_limit`` and ``moe_device_limit`` (``--moe-node-limit``, ``--moe-device-limit``:
    the nodes and devices a token's experts may span; 0 = no limit). ``virtual`` left out is 1,
    or 2 for the V schedules (zb-v, dualpipev); given, it is kept or refused, as the CLI's.
    ``grad_dtype`` (``--grad-dtype``: cluster|fp32|bf16|fp16, the gradient buffer and its
    data-parallel reduction). ``optimizer_state`` (``--optimizer-state``:
    cluster|fp32|remainders|bf16|bf16-moments, the Adam state per parameter). ``assign`` (``--assign``): a name-to-actor assignment, a path to its JSON file (or a
    plan.json) or a dict such as ``{"embedding": 0, "layer{i}": "i mod 4", "logits": 3}``; it
    gives the stages and their actors instead of ``partition``/``virtual`` (docs/schedules.md).

    Measured mode (no ``model``): ``schedule`` (any name ``jaxpp-sim schedules`` lists, JaxPP's
    class names such as ``"ZeroBubble"`` or ``"Interleaved1F1B"`` included) or
    ``schedule_file``, ``pp``, ``microbatches``, ``virtual``, and uniform stage times in
    milliseconds ``t_f``, ``t_b`` (input-gradient backward), ``t_w``, ``t_comm`` and the MoE
    all-to-all of a forward and of an input-gradient backward ``t_a2a_f``, ``t_a2a_b``
    (``--t-a2a-f``, ``--t-a2a-b``; overlapped as ``moe_overlap`` says), or ``stage_times``: a
    path to a stage-times JSON file or a dict in that format (:func:`jaxpp_stage_times` makes one
    from JaxPP task times).

    What-if (both modes): ``perturb`` is ``--perturb``'s spec, e.g. "slow-actor=1:1.5,jitter=0.1,
    seed=3", or per-microbatch sequence lengths "seq-lens=2048*7:8192" (measured mode adds
    "nominal-seq-len=N"; docs/simulate.md): the result is the perturbed run and
    ``metrics["perturbation"]`` compares it with the unperturbed one (step, bubble, per-actor
    idle time and end delay); no ``plan`` then, and not with ``breakdown``.

    ``trace=False`` skips recording the events (faster). Returns a :class:`SimResult`.
    """
    # Types first, in both modes: a boolean is True or False, a name a string, a time a number
    # (bool("false") is True; str(5) made a schedule name of 5; "1" was read as 1 ms).
    fuse_steady_state = _bool("fuse_steady_state", fuse_steady_state)
    sequence_parallel = _bool("sequence_parallel", sequence_parallel)
    zero1 = _bool("zero1", zero1)
    overlap_grad_reduce = _bool("overlap_grad_reduce", overlap_grad_reduce)
    tp_comm_overlap = _bool("tp_comm_overlap", tp_comm_overlap)
    breakdown = _bool("breakdown", breakdown)
    check_memory = _bool("check_memory", check_memory)
    trace = _bool("trace", trace)
    shard_grads = _bool("shard_grads", shard_grads)
    shard_params = _bool("shard_params", shard_params)
    for name, value in (("schedule", schedule), ("recompute", recompute),
                        ("attention", attention), ("partition", partition),
                        ("moe_overlap", moe_overlap), ("perturb", perturb),
                        ("grad_dtype", grad_dtype), ("a2a_dtype", a2a_dtype),
                        ("optimizer_state", optimizer_state), ("moe_dispatcher", moe_dispatcher),
                        ("moe_routing", moe_routing)):
        if value is not None:
            _str(name, value)
    if schedule_file is not None:
        schedule_file = _path("schedule_file", schedule_file)
    t_f, t_b = _opt_float("t_f", t_f), _opt_float("t_b", t_b)
    t_w, t_comm = _float("t_w", t_w), _float("t_comm", t_comm)
    t_a2a_f, t_a2a_b = _float("t_a2a_f", t_a2a_f), _float("t_a2a_b", t_a2a_b)
    moe_imbalance = _float("moe_imbalance", moe_imbalance)
    max_memory_gib = _opt_float("max_memory_gib", max_memory_gib)
    if model is not None:
        refused = [k for k, v in (("microbatches", microbatches), ("t_f", t_f), ("t_b", t_b),
                                  ("stage_times", stage_times)) if v is not None]
        refused += [k for k, v in (("t_w", t_w), ("t_comm", t_comm), ("t_a2a_f", t_a2a_f),
                                   ("t_a2a_b", t_a2a_b)) if v]
        if refused:  # the CLI's messages, naming the flags
            flag = "--" + refused[0].replace("_", "-")
            raise InputError(f"{flag}: a measured-mode flag, but --model selects model mode (the "
                             "microbatches are --global-batch / (dp x --microbatch-size))")
        for flag, value, what in (("--gpus", gpus, "total GPUs"), ("--pp", pp, "pipeline actors"),
                                  ("--global-batch", global_batch, "sequences per iteration")):
            if value is None:
                raise InputError(f"{flag}: required ({what})")
        m = _model(model)
        if a2a_dtype is not None:
            m = Model._of(_json.loads(_core.model_with_a2a_dtype(_json.dumps(m._spec),
                                                                 a2a_dtype)))
        c = _cluster(cluster)
        out = _core.simulate_model(
            _json.dumps(m._spec), _json.dumps(c._spec), _int("gpus", gpus), _int("pp", pp),
            _int("tp", tp),
            _int("dp", dp), _int("cp", cp), _opt_int("virtual", virtual),
            _int("global_batch", global_batch), _int("microbatch_size", microbatch_size),
            schedule or "", schedule_file or "", fuse_steady_state, recompute,
            sequence_parallel, zero1, overlap_grad_reduce, tp_comm_overlap, attention,
            partition, max_memory_gib, _int("ep", ep),
            _opt_int("etp", etp), moe_imbalance, moe_overlap,
            _perturb_arg(perturb, breakdown), breakdown, check_memory, trace,
            *_assign_args(assign), grad_dtype, shard_grads, shard_params,
            optimizer_state, moe_dispatcher, moe_routing,
            _opt_int("recompute_layers", recompute_layers), _int("offload_layers", offload_layers),
            _recompute_modules_arg(recompute_modules), _int("moe_node_limit", moe_node_limit),
            _int("moe_device_limit", moe_device_limit))
        return SimResult(_json.loads(out.metrics), _json.loads(out.trace) if out.trace else None,
                         _json.loads(out.plan) if out.plan else None)
    _refuse_given((("cluster", cluster, "a100-80g"), ("gpus", gpus, None), ("tp", tp, 1),
                   ("dp", dp, 1), ("cp", cp, 1), ("global_batch", global_batch, None),
                   ("microbatch_size", microbatch_size, 1), ("recompute", recompute, "none"),
                   ("recompute_layers", recompute_layers, None),
                   ("recompute_modules", recompute_modules, None),
                   ("offload_layers", offload_layers, 0),
                   ("sequence_parallel", sequence_parallel, False), ("zero1", zero1, False),
                   ("shard_grads", shard_grads, False), ("shard_params", shard_params, False),
                   ("tp_comm_overlap", tp_comm_overlap, False), ("attention", attention, "flash"),
                   ("partition", partition, "auto"), ("breakdown", breakdown, False),
                   ("ep", ep, 1), ("etp", etp, None), ("moe_imbalance", moe_imbalance, 1.0),
                   ("max_memory_gib", max_memory_gib, None),
                   ("assign", assign, None), ("grad_dtype", grad_dtype, "cluster"),
                   ("optimizer_state", optimizer_state, "cluster"),
                   ("a2a_dtype", a2a_dtype, None),
                   ("moe_dispatcher", moe_dispatcher, "alltoall"),
                   ("moe_routing", moe_routing, "random"),
                   ("moe_node_limit", moe_node_limit, 0), ("moe_device_limit", moe_device_limit, 0)),
                  "a model-mode flag, but without --model simulate runs in measured mode")
    if schedule is not None and schedule_file is not None:  # the CLI's refuse_together
        raise InputError("--schedule and --schedule-file: give a schedule name or a schedule "
                         "file, not both")
    stage_file, stage_text = "", ""
    if stage_times is not None:
        for flag, given in (("--t-f", t_f is not None), ("--t-b", t_b is not None),
                            ("--t-w", t_w), ("--t-comm", t_comm), ("--t-a2a-f", t_a2a_f),
                            ("--t-a2a-b", t_a2a_b)):
            if given:
                raise InputError(f"--stage-times and {flag}: give per-stage times in a file or "
                                 "uniform times, not both")
        if isinstance(stage_times, dict):
            stage_text = _dumps(stage_times, "stage_times")
        else:
            stage_file = _path("stage_times", stage_times, "a path or a dict")
    out = _core.simulate_measured(
        schedule or "", schedule_file or "", _opt_int("pp", pp),
        _opt_int("microbatches", microbatches),
        _opt_int("virtual", virtual),
        fuse_steady_state, t_f, t_b, t_w, t_comm, t_a2a_f, t_a2a_b, moe_overlap, stage_file,
        stage_text, _perturb_arg(perturb), trace)
    return SimResult(_json.loads(out.metrics), _json.loads(out.trace) if out.trace else None)


# --- explore --------------------------------------------------------------------------------------

class ExploreResult:
    """The explorer's result: ``summary`` is the dict ``jaxpp-sim explore --json`` prints.
    ``ranked`` lists the feasible configurations fastest first, ``pareto`` the step-time /
    memory front, ``best`` the first of ``ranked``."""

    def __init__(self, summary, request, explore_s=0.0, best_plan=None, csv_text=None):
        self.summary = summary
        self._request = request
        self._best_plan = best_plan
        #: every simulated configuration as CSV (``explore --csv``), with ``explore(csv=True)``
        self.csv_text = csv_text
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
    warnings = property(lambda self: self.summary.get("warnings", []),
                        doc="warnings about the best configuration (as the CLI prints them)")
    robust = property(lambda self: self.summary.get("robust"),
                      doc="explore(robust=N): {runs, jitter, ranking by p90 step time}, or None")
    synthesis = property(lambda self: self.summary.get("synthesis"),
                         doc="explore(synthesize=True): {considered, improved, seconds}, or None")

    def best_plan(self):
        """The plan (plan.json format, metrics in ``predicted``) of the best configuration, as
        ``explore --plan`` writes it (the synthesized plan when a synthesized schedule won)."""
        if self._best_plan:
            return _json.loads(self._best_plan)
        return self.plan(self.best)

    def plan(self, entry):
        """The plan of one simulated configuration: ``entry`` is an element of ``ranked`` or
        ``configs`` (or its ``config`` dict); built and simulated as ``explore --plan`` builds
        the best one, with the exploration's partition mode and memory limit (so a
        balanced-time plan has the searched partition and the entry's step time). A synthesized configuration's plan is given by :meth:`best_plan` only."""
        if not isinstance(entry, dict):
            raise InputError(f"entry: expected a configuration dict (an element of ranked or "
                             f"configs, or its config), got {entry!r}")
        config = entry.get("config", entry)
        if not isinstance(config, dict):
            raise InputError(f"entry: field 'config': expected a dict, got {config!r}")
        if config.get("schedule") == "synthesized":
            raise InputError("plan: a synthesized configuration is not rebuilt from its config; "
                             "use best_plan()")
        m, c, gpus, gb, ogr, partition, max_memory_gib, assign = self._request
        return _json.loads(_core.explore_plan(m, c, gpus, gb, _dumps(config, "config"), ogr,
                                              partition, max_memory_gib, *assign))

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
            schedules=None, pp=None, tp=None, ep=None, etp=None, cp=None, microbatch_sizes=None,
            virtual=None, recompute=None, zero1="both", sequence_parallel=False,
            attention="flash", tp_comm_overlap=False, overlap_grad_reduce=False,
            bound_prune=False, partition="auto", threads=None, top=10, explain=False, csv=False, synthesize=False,
            synthesize_top=None, synthesize_time_s=None, robust=None, robust_jitter=None,
            progress=None, assign=None, grad_dtype="cluster", a2a_dtype=None,
            shard_grads="off", shard_params="off", optimizer_state="cluster",
            moe_dispatcher="alltoall", moe_routing="random", offload_layers=None):
    """Search the parallel configurations of ``model`` on ``gpus`` GPUs of ``cluster``, as
    ``jaxpp-sim explore``. The list arguments (``schedules``, ``pp``, ``tp``, ``ep``, ``etp``,
    ``cp``, ``microbatch_sizes``, ``virtual``, ``recompute``, ``offload_layers``) restrict the
    space: each a list or tuple, one value, or a comma-separated string as the CLI's flag
    (``schedules="1f1b,zb-h1"``, ``pp="2,4"``, ``pp=2``); None is the default domain, and an
    empty one is refused as the CLI refuses ``--pp ''`` (docs/explore.md; ``ep``/``etp``:
    expert parallelism of MoE models;
    ``recompute`` items are none, selective, full, op, "full:N", full recompute of the first N
    transformer layers of each stage, or "selective:a+b", selective recompute of Megatron-Core's
    recompute modules a and b, e.g. "selective:layernorm+mla_up_proj"). ``zero1`` is "off", "on" or "both". ``bound_prune`` skips configurations a simulated one
    bounds (``--bound-prune``; automatic partition only). ``partition`` partitions every
    configuration: "auto" (FLOPs balanced), "even" (Megatron-LM's split) or "balanced-time"
    (least simulated step time under ``max_memory_gib``, up to 4·S+16 simulations per
    configuration; docs/partition.md), as ``--partition``; :meth:`ExploreResult.plan` and
    :meth:`ExploreResult.best_plan` rebuild plans with the same partition. ``explain`` lists the pruned configurations in
    ``summary["pruned_configs"]``; ``csv=True`` fills ``ExploreResult.csv_text`` (``--csv``).
    ``assign`` (``--assign``, a path or a dict as in :func:`simulate`) fixes a name-to-actor
    assignment: ``pp`` must be one number (its actors), and every schedule that fits it is
    evaluated. ``grad_dtype`` (``--grad-dtype``), ``optimizer_state`` (``--optimizer-state``),
    ``moe_dispatcher`` (``--moe-dispatcher``), ``moe_routing`` (``--moe-routing``) and
    ``a2a_dtype`` (``--a2a-dtype``) apply to every configuration, as in :func:`simulate`. ``shard_grads`` (``--shard-grads``) is "off", "on" or
    "both": gradient sharding (ZeRO-2) of the ZeRO-1 configurations; ``shard_params``
    (``--shard-params``) likewise for parameter sharding (ZeRO-3 / FSDP). ``offload_layers``
    (``--offload-layers``): activation offloading to try in the pp-1, recompute-none
    configurations, numbers of layers and "auto" (the fewest that fit), e.g. ``[0, 8, "auto"]``.

    What-if: ``synthesize=True`` also synthesizes a schedule for the ``synthesize_top`` (10)
    best configurations with one stage per actor, ``synthesize_time_s`` (0.1) each
    (``--synthesize``); ``robust=N`` ranks the ``top`` best by their p90 step time over N runs
    with task times jittered by ``robust_jitter`` (0.1) (``--robust``).

    ``progress(done, total)`` is called after each unit of work (from a worker thread, holding
    the GIL). Raises :class:`InputError` when nothing fits (the CLI's message). Returns an
    :class:`ExploreResult`."""
    sequence_parallel = _bool("sequence_parallel", sequence_parallel)
    tp_comm_overlap = _bool("tp_comm_overlap", tp_comm_overlap)
    overlap_grad_reduce = _bool("overlap_grad_reduce", overlap_grad_reduce)
    bound_prune = _bool("bound_prune", bound_prune)
    explain, csv = _bool("explain", explain), _bool("csv", csv)
    synthesize = _bool("synthesize", synthesize)
    zero1, attention, partition = (_str("zero1", zero1), _str("attention", attention),
                                   _str("partition", partition))
    grad_dtype, optimizer_state = (_str("grad_dtype", grad_dtype),
                                   _str("optimizer_state", optimizer_state))
    shard_grads, shard_params = (_str("shard_grads", shard_grads),
                                 _str("shard_params", shard_params))
    moe_dispatcher, moe_routing = (_str("moe_dispatcher", moe_dispatcher),
                                   _str("moe_routing", moe_routing))
    if progress is not None and not callable(progress):
        raise InputError(f"progress: expected a callable progress(done, total), got {progress!r}")
    m = _json.dumps(_model(model)._spec)
    if a2a_dtype is not None:
        m = _core.model_with_a2a_dtype(m, _str("a2a_dtype", a2a_dtype))
    c = _json.dumps(_cluster(cluster)._spec)
    max_memory = _opt_float("max_memory_gib", max_memory_gib)
    out = _core.explore(
        m, c, _int("gpus", gpus), _int("global_batch", global_batch), max_memory,
        _str_list("schedules", schedules, "expected at least one name"),
        _int_list("pp", pp), _int_list("tp", tp), _int_list("ep", ep), _int_list("etp", etp),
        _int_list("cp", cp), _int_list("microbatch_sizes", microbatch_sizes),
        _int_list("virtual", virtual),
        _str_list("recompute", recompute, "expected at least one policy"), zero1,
        sequence_parallel, attention, tp_comm_overlap, overlap_grad_reduce, bound_prune,
        partition, _int("threads", threads or 0), _int("top", top), explain, csv, synthesize,
        _opt_int("synthesize_top", synthesize_top),
        _opt_float("synthesize_time_s", synthesize_time_s),
        _opt_int("robust", robust),
        _opt_float("robust_jitter", robust_jitter), progress, *_assign_args(assign),
        grad_dtype, shard_grads, shard_params, optimizer_state, moe_dispatcher, moe_routing,
        _str_list("offload_layers", offload_layers, "expected at least one choice",
                  numbers=True))
    request = (m, c, _int("gpus", gpus), _int("global_batch", global_batch),
               overlap_grad_reduce, partition, max_memory, _assign_args(assign))
    return ExploreResult(_json.loads(out.summary), request, out.explore_s, out.best_plan,
                         out.csv if csv else None)


# --- synthesize -----------------------------------------------------------------------------------

class SynthesisResult:
    """A synthesized schedule. ``report`` is the dict ``jaxpp-sim synthesize --json`` prints;
    ``schedule`` the schedule as a custom schedule dict (``synthesize --out``), ``schedule_json``
    its text, ``csv_text`` the PyTorch pipelining CSV (``synthesize --csv``); in plan mode
    ``plan`` is the plan with the synthesized schedule (``synthesize --plan-out``)."""

    def __init__(self, report, schedule_json, csv_text, plan):
        self.report = report
        self.schedule_json = schedule_json
        self.csv_text = csv_text
        self.plan = plan

    step_time_s = property(lambda self: self.report["step_time_s"],
                           doc="simulated seconds per iteration of the synthesized schedule")
    bubble_rate = property(lambda self: self.report["bubble_rate"],
                           doc="idle fraction of the worst actor")
    peak_stashed = property(lambda self: self.report["peak_stashed"],
                            doc="most stashed microbatches per actor")
    named = property(lambda self: self.report["named"],
                     doc="the built-in schedules considered (step time, bubble, fits)")

    @property
    def schedule(self):
        """The synthesized schedule as a dict in the custom schedule format."""
        return _json.loads(self.schedule_json)

    def __repr__(self):
        return (f"SynthesisResult(step_time_s={self.step_time_s!r}, "
                f"bubble_rate={self.bubble_rate!r})")


def synthesize(*, plan=None, pp=None, microbatches=None, t_f=None, t_b=None, t_w=None,
               t_comm=None, stage_times=None, memory_limit_microbatches=None,
               memory_limit_bytes=None, time_budget_s=2.0, max_evaluations=0):
    """Synthesize the schedule with the shortest simulated step under a memory budget, as
    ``jaxpp-sim synthesize`` (docs/synthesize.md). One stage per actor, every backward split.

    Measured mode: ``pp``, ``microbatches`` and stage times in milliseconds, uniform (``t_f``,
    ``t_b``, ``t_w``, ``t_comm``) or ``stage_times`` (a stage-times file or dict, e.g. from
    :func:`jaxpp_stage_times`); budget ``memory_limit_microbatches`` stashed microbatches per
    actor (default pp).

    Plan mode: ``plan`` (a dict, a path, or a model-mode :class:`SimResult`) priced by its cost
    model; budget ``memory_limit_microbatches`` or ``memory_limit_bytes`` per device (default
    the cluster's memory).

    The local search stops at a local optimum, after ``time_budget_s`` seconds or after
    ``max_evaluations`` replays (0 = no bound; a bound gives the same schedule on every
    machine). Returns a :class:`SynthesisResult`."""
    for name, value in (("t_f", t_f), ("t_b", t_b), ("t_w", t_w), ("t_comm", t_comm)):
        if stage_times is not None and value is not None:
            raise InputError(f"--stage-times and --{name.replace('_', '-')}: give per-stage "
                             "times in a file or uniform times, not both")
    if memory_limit_bytes is not None and memory_limit_microbatches is not None:
        raise InputError("--memory-limit-bytes and --memory-limit-microbatches: give the budget "
                         "in bytes or in stashed microbatches, not both")
    plan_text, plan_source = "", "plan"
    if plan is not None:
        _refuse_given((("pp", pp, None), ("microbatches", microbatches, None), ("t_f", t_f, None),
                       ("t_b", t_b, None), ("t_w", t_w, None), ("t_comm", t_comm, None),
                       ("stage_times", stage_times, None)),
                      "a measured-mode flag, but --plan gives the stages, microbatches and times")
        plan_text, plan_source = _plan_text(plan)
    else:
        _refuse_given((("memory_limit_bytes", memory_limit_bytes, None),),
                      "a plan-mode flag, but without --plan synthesize runs in measured mode")
    stage_file, stage_text = "", ""
    if isinstance(stage_times, dict):
        stage_text = _dumps(stage_times, "stage_times")
    elif stage_times is not None:
        stage_file = _path("stage_times", stage_times, "a path or a dict")
    out = _core.synthesize(
        plan_text, plan_source, _opt_int("pp", pp),
        _opt_int("microbatches", microbatches),
        _opt_float("t_f", t_f), _opt_float("t_b", t_b),
        _float("t_w", 0.0 if t_w is None else t_w),
        _float("t_comm", 0.0 if t_comm is None else t_comm), stage_file, stage_text,
        _opt_int("memory_limit_microbatches", memory_limit_microbatches),
        _opt_int("memory_limit_bytes", memory_limit_bytes, 64),
        _float("time_budget_s", time_budget_s),
        _int("max_evaluations", max_evaluations, 64))
    return SynthesisResult(_json.loads(out.report), out.schedule, out.csv,
                           _json.loads(out.plan) if out.plan else None)


# --- show, validate, export -----------------------------------------------------------------------

def show(*, schedule=None, schedule_file=None, pp=None, microbatches=None, stages=None,
         fuse_steady_state=False, group_size=None):
    """A schedule's per-actor order and unit-cost timeline, as ``jaxpp-sim show --json``, plus
    ``text`` (the order), ``timeline_text`` (the unit-cost Gantt chart), ``json_text`` and
    ``csv_text`` (the schedule as a custom schedule file, ``show --export-json/--export-csv``).
    ``ok`` and ``errors`` say whether the schedule is valid. With ``schedule_file``, ``pp``,
    ``microbatches``, ``stages``, ``fuse_steady_state`` and ``group_size`` are refused (the file
    fixes the schedule), as the CLI refuses their flags."""
    if schedule_file is not None and _path("schedule_file", schedule_file) == "":
        raise InputError(_EMPTY_PATH)  # the core reads "" as "not given"; the CLI reads the file
    return _json.loads(_core.show(_opt_str("schedule", schedule),
                                  _opt_path("schedule_file", schedule_file),
                                  _opt_int("pp", pp), _opt_int("microbatches", microbatches),
                                  _opt_int("stages", stages),
                                  _bool("fuse_steady_state", fuse_steady_state),
                                  _opt_int("group_size", group_size)))


def validate(path):
    """Check a custom schedule file (JSON or PyTorch CSV) or a plan file, as
    ``jaxpp-sim validate --json``: a dict with ``ok`` and ``errors``."""
    return _json.loads(_core.validate(_path("path", path)))


_EXPORT_FORMATS = ("perfetto", "chrome", "svg", "png", "dot", "text", "json")
_HANDOFF_FORMATS = ("megatron", "torchtitan", "jaxpp")


def _is_plan(value):
    return isinstance(value, dict) and "program" in value and "config" in value


def export(result, format="perfetto", *, width=None, per_stream=False, title=None, csv_path=None,
           view="timeline"):
    """Export a timeline or hand a plan to a trainer, as ``jaxpp-sim export``.

    Timelines: ``format`` "perfetto" / "chrome" (JSON text for ui.perfetto.dev), "svg", "dot",
    "text" (Gantt chart), "json" (the trace) as a string, "png" as bytes. ``result`` is a
    :class:`SimResult`, a :class:`RunResult`, a trace dict, or a plan (a dict in the plan.json
    format or its path: simulated with the cost model first, memory not checked, as
    ``export --plan``). ``view="taskgraph"`` draws a plan's task graph instead ("dot", "svg",
    "png"; ``--view taskgraph``).

    Hand-off (``result`` a plan: a dict, a path or a model-mode :class:`SimResult`):
    "megatron" (Megatron-LM arguments), "torchtitan" (a job config TOML; ``csv_path`` is
    required: the TOML loads the schedule from it, and the schedule CSV is written there as
    ``export --csv`` does), "jaxpp" (a Python snippet). Returns the text. A plan the target
    cannot express raises :class:`InputError` with the CLI's message."""
    # width and title None: not given (an option the format would ignore is refused, as the
    # CLI's flag: --width on perfetto, --title on text).
    fmt, view = _str("format", format), _str("view", view)
    title = None if title is None else _str("title", title)
    width, per_stream = _opt_int("width", width), _bool("per_stream", per_stream)
    if isinstance(result, (str, _os.PathLike)):
        result = _path("result", result)  # a plan's path (a pathlib.Path too)
    elif not isinstance(result, (dict, SimResult, RunResult)):
        raise InputError(f"result: expected a SimResult, a RunResult, a trace dict or a plan (a "
                         f"dict or a path), got {result!r}")
    if csv_path is not None:
        csv_path = _path("csv_path", csv_path)
        if csv_path == "-":  # the CLI's stdout: here a file of that name was written
            raise InputError("csv_path: '-' is the CLI's standard output; give a file name "
                             "(the schedule CSV is written there)")
    if fmt in _HANDOFF_FORMATS:
        if csv_path is not None and fmt != "torchtitan":
            raise InputError("--csv: only --format torchtitan writes a schedule CSV")
        if width is not None or per_stream or title is not None or view != "timeline":
            flag = ("--width" if width is not None else "--per-stream" if per_stream else
                    "--title" if title is not None else "--view")
            raise InputError(f"{flag}: a timeline option; --format {fmt} writes text for a "
                             "trainer")
        if not (isinstance(result, (str, SimResult)) or _is_plan(result)):
            raise InputError(f"--format {fmt}: hands a plan to a trainer (give a plan)")
        if fmt == "torchtitan" and csv_path is not None:
            # The CLI's --csv checks: a writable file, and not the plan file given (it was
            # overwritten with the schedule CSV).
            _core.check_handoff_csv(csv_path, result if isinstance(result, str) else "")
        text, source = _plan_text(result)
        out, csv, _schedule = _core.handoff(text, source, fmt, csv_path or "")
        if fmt == "torchtitan":
            try:
                with open(csv_path, "w", encoding="utf-8") as f:
                    f.write(csv)
            except OSError as e:
                raise InputError(f"--csv {csv_path}: cannot write ({e.strerror})") from None
        return out
    if csv_path is not None:
        raise InputError("--csv: only --format torchtitan writes a schedule CSV")
    if isinstance(result, str) or _is_plan(result):
        text, source = _plan_text(result)
        return _core.export_plan(text, source, fmt, view, width, per_stream, title)
    if view not in ("timeline", "taskgraph"):
        raise InputError(f"--view: unknown view '{view}' (expected timeline or taskgraph)")
    if view == "taskgraph":
        raise InputError("--view taskgraph: needs --plan FILE")
    if isinstance(result, (SimResult, RunResult)):
        trace = result.trace_json()
    else:
        trace = result
    if not trace:
        raise InputError("export: the result has no trace (simulate with trace=True)")
    return _core.export_trace(_dumps(trace, "trace"), fmt, width, per_stream, title)


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


def run(plan=None, *, schedule=None, schedule_file=None, pp=None, microbatches=None, virtual=None,
        fuse_steady_state=False, compute="real", time_scale=None, steps=3, warmup=1, dp=None,
        timeout_s=30.0, check=False, hidden=None, seq=None, layers_per_stage=None, optimizer=None,
        seed=None, inject_drop=-1):
    """Execute a program on the threads backend, as ``jaxpp-sim run``: a plan (a dict in the
    plan.json format, e.g. ``ExploreResult.best_plan()`` or ``SimResult.plan``, a path read as
    the CLI reads ``run PLAN.json``, or a model-mode :class:`SimResult`) or a
    schedule (``schedule``, ``pp``, ``microbatches``, ``virtual``) on the MLP workload.
    ``compute`` is "real" (fp64 numerics; ``check=True`` compares with the independent
    reference) or "emulated" (each task sleeps its predicted duration times ``time_scale``).
    ``inject_drop=TAG`` loses that message (``--inject-drop``: the receiver times out after
    ``timeout_s``). The MLP workload's ``hidden`` (32), ``seq`` (8), ``layers_per_stage`` (2),
    ``optimizer`` ("sgd") and ``seed`` (1234) are for real compute and ``time_scale`` (1.0) for
    emulated compute: given with the other, each is refused as the CLI refuses its flag; so are
    ``pp``, ``microbatches``, ``virtual`` and ``fuse_steady_state`` with a plan or a schedule
    file, and a ``dp`` other than the plan's (the defaults are the CLI's: ``microbatches`` 4,
    ``virtual`` 1, ``dp`` 1 or the plan's). Raises
    ``RuntimeError`` when the run fails (timeout, dead peer), with the message the CLI prints."""
    # The arguments given (not None), refused as the CLI refuses their flags where they cannot
    # take effect (with a plan or a schedule file, with the other compute); the rest take the
    # CLI's defaults (microbatches 4, virtual 1, dp 1 or the plan's).
    given = [flag for flag, value in (("time-scale", time_scale), ("hidden", hidden),
                                      ("seq", seq), ("layers-per-stage", layers_per_stage),
                                      ("optimizer", optimizer), ("seed", seed), ("pp", pp),
                                      ("microbatches", microbatches), ("virtual", virtual),
                                      ("dp", dp))
             if value is not None]
    if _bool("fuse_steady_state", fuse_steady_state):
        given.append("fuse-steady-state")
    time_scale = 1.0 if time_scale is None else time_scale
    hidden, seq = (32 if hidden is None else hidden), (8 if seq is None else seq)
    layers_per_stage = 2 if layers_per_stage is None else layers_per_stage
    optimizer = "sgd" if optimizer is None else optimizer
    seed = 1234 if seed is None else seed
    fuse_steady_state, check = (_bool("fuse_steady_state", fuse_steady_state),
                                _bool("check", check))
    schedule, compute, optimizer = (_opt_str("schedule", schedule), _str("compute", compute),
                                    _str("optimizer", optimizer))
    if schedule_file is not None and _path("schedule_file", schedule_file) == "":
        raise InputError(_EMPTY_PATH)  # the core reads "" as "not given"; the CLI reads the file
    schedule_file = _opt_path("schedule_file", schedule_file)
    # A plan's path is read here, with the core's checks (a FIFO, /dev/zero, a directory).
    plan_text, plan_source = ("", "plan") if plan is None else _plan_text(plan)
    text = _core.run(schedule, schedule_file, _int("pp", 0 if pp is None else pp),
                     _int("microbatches", 0 if microbatches is None else microbatches),
                     _int("virtual", 1 if virtual is None else virtual), fuse_steady_state,
                     plan_text, plan_source,
                     compute,
                     _cli_float("--time-scale", "time_scale", time_scale), _int("steps", steps),
                     _int("warmup", warmup), _int("dp", 1 if dp is None else dp),
                     _cli_float("--timeout-s", "timeout_s", timeout_s),
                     check, _int("hidden", hidden), _int("seq", seq),
                     _int("layers_per_stage", layers_per_stage), optimizer,
                     _int("seed", seed, 64, signed=False), _int("inject_drop", inject_drop, 64),
                     given)
    return RunResult(_json.loads(text))


# --- validate-model, calibrate -------------------------------------------------------------------

def validate_model(*, corpus=None, cluster=None, rows_on=None, split="all", band=0.10):
    """Score the cost model against the validation corpus of published training runs, as
    ``jaxpp-sim validate-model --json`` (docs/validation.md): per row the predicted and measured
    step time and the error, and the summaries of the fit and test rows, by source and by GPU.
    ``corpus`` is a corpus file (default: the corpus built into the module), ``cluster`` a
    cluster (name, path, dict or :class:`Cluster`) replacing every row's, ``rows_on`` keeps the
    rows on one cluster preset, ``split`` is "fit", "test" or "all", ``band`` the allowed
    |error|. Returns the report dict."""
    # The core reads "" as "not given": refused here as the CLI refuses --rows-on '' and
    # --corpus ''.
    rows_on = None if rows_on is None else _str("rows_on", rows_on)
    split = _str("split", split)
    corpus = None if corpus is None else _path("corpus", corpus)
    if rows_on == "":
        raise InputError("--rows-on : expected a cluster preset name, the \"cluster\" of the "
                         f"rows to keep (one of: {', '.join(clusters())})")
    cluster_text = "" if cluster is None else _json.dumps(_cluster(cluster)._spec)
    if corpus == "":
        raise InputError(_EMPTY_PATH)
    return _json.loads(_core.validate_model("" if corpus is None else corpus, cluster_text,
                                            rows_on or "", split, _float("band", band)))


class CalibrationResult:
    """A calibration: ``report`` is the dict ``jaxpp-sim calibrate --json`` prints (fits,
    parameters, residuals), ``cluster`` the fitted :class:`Cluster` (``calibrate -o``)."""

    def __init__(self, report, cluster):
        self.report = report
        self.cluster = cluster

    def __repr__(self):
        return f"CalibrationResult({self.cluster!r})"


def calibrate(*, backend="threads", quick=False, hot=False, repeats=None, warmup=None,
              rounds=None, repetition_ms=None, ranks=None, timeout_s=None, base=None, name=None,
              from_trace=None, hidden=None, ffn=None, seq=None, layers_per_stage=None,
              optimizer=None, dp=None, skip_steps=None):
    """Fit a cluster, as ``jaxpp-sim calibrate`` (docs/calibrate.md). Returns a
    :class:`CalibrationResult`; the GIL is released.

    Microbenchmarks of this host on the threads backend (seconds to minutes): GEMM,
    element-wise and copy kernels, point-to-point and all-reduce between ``ranks`` (2) worker
    threads. ``quick`` uses fewer sizes; ``repeats``, ``warmup`` (2), ``rounds``,
    ``repetition_ms``, ``timeout_s`` (60) set the timing (defaults as the CLI's); ``hot`` reuses
    cache-hot operands; ``base`` (a cluster: name, path, dict) gives what is not measured
    (default a100-80g); ``name`` names the result. The mpi and cuda backends are the CLI's.

    From a measured trace (``from_trace``: a ``jaxpp-sim run --trace`` file or
    ``RunResult.trace_json()`` saved as one): ``hidden``, ``ffn``, ``seq``,
    ``layers_per_stage``, ``optimizer``, ``dp`` describe the run (its flags; each one left None
    is the one the trace records, else the CLI's default; one given must be the recorded one),
    ``skip_steps`` the warm-up steps to ignore; ``base`` defaults to a neutral
    reference host."""
    micro = (("backend", backend, "threads"), ("quick", quick, False), ("hot", hot, False),
             ("repeats", repeats, None), ("warmup", warmup, None), ("rounds", rounds, None),
             ("repetition_ms", repetition_ms, None), ("ranks", ranks, None),
             ("timeout_s", timeout_s, None))
    run_flags = (("hidden", hidden, None), ("ffn", ffn, None), ("seq", seq, None),
                 ("layers_per_stage", layers_per_stage, None), ("optimizer", optimizer, None),
                 ("dp", dp, None), ("skip_steps", skip_steps, None))
    # The CLI's parser refuses NaN and infinities before anything runs (or any mode check).
    repetition_ms = _opt_cli_float("--repetition-ms", "repetition_ms", repetition_ms)
    timeout_s = _opt_cli_float("--timeout-s", "timeout_s", timeout_s)
    quick, hot, backend = _bool("quick", quick), _bool("hot", hot), _str("backend", backend)
    name = "" if name is None else _core.checked_cluster_name(_str("name", name))
    optimizer = None if optimizer is None else _str("optimizer", optimizer)
    base_text = "" if base is None else _json.dumps(_cluster(base, "base")._spec)
    if from_trace is not None:
        _refuse_given(micro, "a microbenchmark flag, but --from-trace fits from a trace")
        report, cluster = _core.calibrate_trace(
            _path("from_trace", from_trace), _opt_int("hidden", hidden), _opt_int("ffn", ffn),
            _opt_int("seq", seq), _opt_int("layers_per_stage", layers_per_stage), optimizer,
            _opt_int("dp", dp), _opt_int("skip_steps", skip_steps), base_text, name)
        return CalibrationResult(_json.loads(report), Cluster._of(_json.loads(cluster)))
    _refuse_given(run_flags,
                  "describes the run of a --from-trace trace; not used by microbenchmarks")
    if backend != "threads":
        raise InputError(f"--backend: the Python module calibrates on the threads backend, not "
                         f"{backend!r}; run `jaxpp-sim calibrate --backend {backend}`")
    report, cluster = _core.calibrate(
        quick, hot, _opt_int("repeats", repeats),
        _int("warmup", 2 if warmup is None else warmup), _opt_int("rounds", rounds),
        repetition_ms, _int("ranks", 2 if ranks is None else ranks),
        60.0 if timeout_s is None else timeout_s, base_text, name)
    return CalibrationResult(_json.loads(report), Cluster._of(_json.loads(cluster)))


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
    return _int(f"jaxpp task times: key {key!r}: stage_id", stage), name.upper()


def jaxpp_stage_times(task_times, *, unit="s", t_comm_ms=0.0):
    """A stage-times dict for ``simulate(stage_times=...)`` from JaxPP task times.

    Assumed shape (docs/python.md): a mapping from a task to its measured time, where a task is
    a ``jaxpp.types.Task`` (``stage_id``, ``mubatch_idx``, ``task_type``) or the tuple
    ``(stage_id, mubatch_idx, task_type)`` / ``(stage_id, task_type)``, ``task_type`` a
    ``TaskType`` member or its name (FWD, BWD, BWD_I, BWD_W); a value is a number or a list of
    samples (averaged). ``unit`` is "s" or "ms". Per stage: T_F = mean FWD; with split backward
    T_B = mean BWD_I and T_W = mean BWD_W; with a full backward T_B = mean BWD and T_W = 0
    (the simulator prices B = T_B + T_W). Every stage 0..S-1 needs FWD and a backward."""
    if not isinstance(unit, str) or unit not in ("s", "ms"):
        raise InputError(f"jaxpp task times: unit: expected 's' or 'ms', got {unit!r}")
    scale = 1e3 if unit == "s" else 1.0
    sums = {}
    try:
        items = dict(task_times).items()
    except (TypeError, ValueError):
        raise InputError(f"jaxpp task times: expected a dict from tasks to times, got "
                         f"{task_times!r}") from None
    t_comm_ms = _float("t_comm_ms", t_comm_ms, flag="")
    for key, value in items:
        stage, kind = _task_key(key)
        samples = list(value) if isinstance(value, (list, tuple)) else [value]
        if not samples:
            raise InputError(f"jaxpp task times: key {key!r}: no samples")
        acc = sums.setdefault((stage, kind), [0.0, 0])
        # A sample is a number: float(True) was 1 s, float("1") 1 s.
        where = f"jaxpp task times: key {key!r}"
        acc[0] += sum(_float(where, v, flag="") for v in samples) * scale
        acc[1] += len(samples)
    if not sums:
        raise InputError("jaxpp task times: empty")
    num_stages = max(s for s, _ in sums) + 1
    stages = []
    for s in range(num_stages):
        mean = {k: v[0] / v[1] for (st, k), v in sums.items() if st == s}
        if "FWD" not in mean:
            raise InputError(f"jaxpp task times: stage {s}: no FWD time")
        entry = {"t_f_ms": mean["FWD"], "t_comm_ms": t_comm_ms}
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

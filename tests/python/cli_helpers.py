"""Helpers of the Python tests: run the jaxpp-sim binary of this build (JAXPP_SIM_BINARY) and read
its --json output or its one-line error, to compare with jaxpp_sim's results."""

import json
import os
import subprocess

BINARY = os.environ["JAXPP_SIM_BINARY"]


def cli(*args):
    """(exit code, stdout, stderr) of jaxpp-sim ARGS."""
    p = subprocess.run([BINARY, *args], capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def cli_json(*args):
    code, out, err = cli(*args, "--json")
    assert code == 0, err
    return json.loads(out)


def cli_error(command, *args):
    """The message of jaxpp-sim's one-line error (exit 2), without the 'jaxpp-sim CMD: error: '."""
    code, out, err = cli(command, *args)
    assert code == 2, (code, out, err)
    line = err.strip().splitlines()[-1]
    prefix = f"jaxpp-sim {command}: error: "
    assert line.startswith(prefix), line
    return line[len(prefix):]

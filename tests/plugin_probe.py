"""Run in a subprocess whose ``sys.path`` holds a plugin (an installed distribution, or a copy of the package with a
backend file dropped in): the CLI's help, a run and a tune through the backend ``argv[1]``, and tune's default
space, printed as one JSON line for the test to read. ``argv[2]``: the results store."""

import json
import sys

from typer.testing import CliRunner

from accelbench.cli import app

mode, db = sys.argv[1], sys.argv[2]
tiny = [
    "--device",
    "cpu",
    "--images",
    "4",
    "--idle-s",
    "0",
    "--telemetry-period-ms",
    "0",
    "--min-timed-batches",
    "1",
    "--db",
    db,
]
runner = CliRunner()
out = {
    name: runner.invoke(app, [*args, "--help"], env={"COLUMNS": "1000"}).output
    for name, args in (("run_help", ["run"]), ("train_help", ["train"]), ("tune_help", ["tune"]))
}
run = runner.invoke(app, ["run", "-m", "cifar-resnet20", "--modes", mode, "-p", "fp32", "-b", "2", *tiny])
tune = runner.invoke(
    app,
    [
        "tune",
        "-m",
        "cifar-resnet20",
        "-p",
        "fp32",
        "--modes",
        mode,
        "-b",
        "2",
        "--screen-time-s",
        "0",
        "--final-rounds",
        "1",
        "--final-repeats",
        "2",
        "--budget-s",
        "120",
        *tiny,
    ],
)
models = runner.invoke(app, ["models"])

from accelbench import backends, precisions  # noqa: E402
from accelbench.studies.tune_space import default_space  # noqa: E402

out.update(
    run=[run.exit_code, run.output],
    tune=[tune.exit_code, tune.output],
    models=models.output,
    default_modes=list(default_space(False, "throughput")[1]),
    backend_file=sys.modules[type(backends.get(mode)).__module__].__file__,
    precisions=list(precisions.PRECISIONS),
)
print(json.dumps(out))

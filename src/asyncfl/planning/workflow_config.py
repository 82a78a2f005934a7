"""The workflow's configuration as a whole, checked while Snakemake parses it (every experiment, its
tuning grid, the config files' names), and the command line that ran the workflow, for the archive.
Apart from `experiments` and `tuning`, which it checks with: tuning builds on the experiments' run
settings, so neither imports the other's caller."""

import os
import re
import shlex
from pathlib import Path
from typing import Any

from asyncfl.planning.experiments import check_choice, check_experiment
from asyncfl.planning.tuning import check_tune
from asyncfl.settings.errors import InputError
from asyncfl.settings.names import DATASETS
from asyncfl.settings.yaml_files import read_yaml


def check_config_files(paths: list[str]) -> None:
    """The config files are archived under config/BASENAME: two with one base name would collide
    there, at the very end of the workflow; refused while it parses instead. Each is also read as asyncfl
    reads a YAML file (`read_yaml`): Snakemake's reading keeps the last of a key given twice, silently."""
    names: dict[str, str] = {}
    for path in paths:
        name = os.path.basename(path)
        if name in names and os.path.abspath(names[name]) != os.path.abspath(path):
            raise InputError(
                f"--configfile {names[name]} and {path} have one base name, {name}, under which the archive "
                "keeps each config; rename one of them"
            )
        names[name] = path
    for path in paths:
        read_yaml(Path(path))


# A config file's name as it names its outputs' folder: no leading dot (`..`, a hidden folder), no control
# character, no brace (Snakemake would read a wildcard); every command quotes it
CONFIG_NAME = re.compile(r"[^.{}\x00-\x1f][^{}\x00-\x1f]*")


def config_name(paths: list[str]) -> str:
    """The name of the config a workflow runs, its file's stem (`quick` for .test/config/quick.yaml,
    `config` for the default), joined by + where several are given: the folder of what the config's
    runs share (the archive, the report), so that two configs run in one clone keep theirs apart."""
    stems = [Path(path).stem for path in paths]
    for path, stem in zip(paths, stems, strict=True):
        if not CONFIG_NAME.fullmatch(stem):
            raise InputError(
                f"--configfile {path}: its name {stem!r} names the config's archive folder, "
                "results/archive/NAME; rename the file so that it starts with no dot and holds no brace"
            )
    return "+".join(stems)


SCHEMA = Path(__file__).parents[3] / "workflow" / "schemas" / "config.schema.yaml"


def check_schema(config: dict[str, Any], schema: Path = SCHEMA) -> None:
    """The config against the workflow's JSON schema, before Snakemake's own check (which fills in its
    defaults): its most telling error as one line naming the key, where the schema's message names only
    the value ("nan is not of type 'array'"). jsonschema comes with Snakemake."""
    import jsonschema  # type: ignore[import-untyped]
    import yaml

    rules = yaml.safe_load(schema.read_text())
    base = jsonschema.validators.validator_for(rules)
    # an integer is an int: JSON Schema's also admits 10.0 and 1e308, which reach range() and numpy as floats
    integers = base.TYPE_CHECKER.redefine("integer", lambda _, value: type(value) is int)
    strict = jsonschema.validators.extend(base, type_checker=integers)
    error = jsonschema.exceptions.best_match(strict(rules).iter_errors(config))
    if error is not None:
        where = ".".join(str(part) for part in error.absolute_path) or "the config"
        raise InputError(f"{where}: {error.message[:200]} (workflow/schemas/config.schema.yaml; config/README.md)")


def check_workflow_config(config: dict[str, Any]) -> None:
    """Every check of the workflow's configuration the schema cannot make; raises InputError."""
    for dataset in config.get("data", {}).get("roots", {}):
        check_choice("data.roots", dataset, DATASETS)
    for name, experiment in config["experiments"].items():
        check_experiment(name, experiment, config["reference_J"])
        check_tune(f"experiments.{name}", experiment, config["reference_J"])


def record_command(argv: list[str]) -> None:
    """Hand the workflow's command line to the archive rule (its provenance) through the environment,
    as ASYNCFL_WORKFLOW_COMMAND: a rule param would make every new command line re-run the archive."""
    os.environ["ASYNCFL_WORKFLOW_COMMAND"] = shlex.join(argv)


def report_folder(argv: list[str]) -> Path | None:
    """The folder of the report `snakemake --report FILE` (or `--report=FILE`) will write, which Snakemake
    does not make (after a cluster run results/reports/ does not exist); None without --report."""
    for index, argument in enumerate(argv):
        if argument.startswith("--report="):
            return Path(argument.split("=", 1)[1]).parent
        if argument == "--report" and index + 1 < len(argv) and not argv[index + 1].startswith("-"):
            return Path(argv[index + 1]).parent
    return None


FAILED_RULE = re.compile(r"^Error in rule (?P<rule>\S+):$")
FAILED_FIELD = re.compile(r"^\s+(?P<field>output|log): (?P<value>.*?)(?: \(check log file\(s\) for error details\))?$")


def failure_summary(logs: list[str]) -> str:
    """The end of a failed workflow's output: each failed job once (a retried one's last attempt), its
    outputs and the last line of its log, where asyncfl's one-line cause is; read from Snakemake's own
    log (the first of `logs`, what its `onerror` hands over), whose lines name them among hundreds."""
    readable = [Path(path) for path in logs if Path(path).is_file()]
    if not readable:
        return "asyncfl: the workflow failed, and Snakemake wrote no log to read its failed jobs from"
    snakemake_log = readable[0]
    failed: dict[tuple[str, str], str] = {}
    rule = None
    for line in snakemake_log.read_text(errors="replace").splitlines():
        if found := FAILED_RULE.match(line):
            rule, output = found["rule"], ""
        elif rule and (field := FAILED_FIELD.match(line)):
            if field["field"] == "output":
                output = field["value"]
            else:
                failed[rule, output] = field["value"].split(", ")[0]
        elif rule and not line.startswith((" ", "\t")):
            failed.setdefault((rule, output), "")
            rule = None
    if not failed:  # `-q` leaves Snakemake's job blocks out of its log
        return (
            f"asyncfl: the workflow failed, and Snakemake's log ({snakemake_log}) names no failed job (with -q "
            "it leaves them out): run again without -q to see each failed job and its cause"
        )
    lines = [f"asyncfl: {len(failed)} job(s) failed (each log's last line; Snakemake's log: {snakemake_log}):"]
    for (rule, output), log in failed.items():
        cause = last_line(Path(log)) if log else "no log"
        lines.append(f"  {rule} → {output.split(', ')[0] or '(no output)'}: {cause}" + (f" [{log}]" if log else ""))
    return "\n".join(lines)


def last_line(path: Path) -> str:
    """A log's last non-empty line (asyncfl's one-line error ends its log), or why there is none."""
    if not path.is_file():
        return "its log was not written"
    text = path.read_text(errors="replace").strip()
    return text.splitlines()[-1][:400] if text else "its log is empty"
